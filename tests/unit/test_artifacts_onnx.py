"""The ONNX output of artifacts.check, without containers: the pins, ONNX Runtime
parity on a real ONNX model (built with onnx.helper, run by the pinned onnxruntime), the record in
check.json and the manifest, and what upload accepts. The conversion itself runs in the runtime
image: tests/integration/test_artifacts_onnx_in_image.py."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from paddlecd.artifacts import check as model_check
from paddlecd.artifacts import manifest as am
from paddlecd.artifacts import onnx as onnx_out
from paddlecd.artifacts import transfer as arts
from paddlecd.artifacts.storage.file import FileStore
from paddlecd.errors import ConfigError

ROOT = Path(__file__).parents[2]
DATA = ROOT / "tests" / "data" / "artifacts"
W = np.arange(8, dtype="float32").reshape(4, 2) / 10


def _linear_onnx(path: Path, *, fixed_batch: bool = False) -> Path:
    """y = x @ W with x: [N, 4] (N dynamic unless ``fixed_batch``): opset 13."""
    batch = 1 if fixed_batch else "N"
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])], "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 2])],
        [helper.make_tensor("W", TensorProto.FLOAT, [4, 2], W.flatten().tolist())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # onnxruntime 1.32 reads IR <= 10; 8 is what opset 13 shipped with
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def _refs(folder: Path, *, offset: float = 0.0) -> None:
    x = np.random.default_rng(1).normal(size=(4, 4)).astype("float32")
    np.savez(folder / am.REFERENCE_INPUTS, x=x)
    np.savez(folder / am.REFERENCE_OUTPUTS, output_0=x @ W + offset)


def _loader():
    """smoke/workers/check_export.py, the one maker of feeds (it runs in the image; numpy only
    for these functions)."""
    spec = importlib.util.spec_from_file_location(
        "check_export", ROOT / "smoke" / "workers" / "check_export.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _parity(tmp_path, **kw):
    """Parity on the feeds the loader saves for batches 1 and 3, as artifacts.check runs it."""
    loader, batches = _loader(), (1, 3)
    inputs = [{"name": "x", "shape": [-1, 4], "dtype": "float32"}]
    refs = loader.references(np, str(tmp_path))
    fed = {b: loader.inputs_for(np, inputs, refs, b) for b in batches}
    out = tmp_path / "out"
    out.mkdir()
    feeds = loader.save_feeds(np, str(out), fed)
    return onnx_out.parity(_linear_onnx(tmp_path / "m.onnx", **kw), out, feeds=feeds,
                           batches=batches, rtol=onnx_out.ONNX_RTOL, atol=onnx_out.ONNX_ATOL)


def test_the_pins_are_the_ones_in_pyproject():
    text = (ROOT / "pyproject.toml").read_text()
    assert f'"paddle2onnx=={onnx_out.PADDLE2ONNX_VERSION}"' in text
    assert f'"onnxruntime=={onnx_out.ONNXRUNTIME_VERSION}"' in text
    import onnxruntime

    assert onnxruntime.__version__ == onnx_out.ONNXRUNTIME_VERSION  # the venv holds the pin
    assert onnx_out.REQUIREMENT == f"paddle2onnx=={onnx_out.PADDLE2ONNX_VERSION}"
    assert re.search(rf"paddle2onnx=={onnx_out.PADDLE2ONNX_VERSION}\b",
                     (ROOT / "README.md").read_text())


def test_parity_passes_at_both_batch_sizes(tmp_path):
    _refs(tmp_path)
    cases = _parity(tmp_path)
    assert [c["name"] for c in cases] == ["onnxruntime/batch-1", "onnxruntime/batch-3"]
    assert all(c["passed"] for c in cases), cases
    assert cases[1]["shapes"] == [[3, 2]] and cases[1]["max_abs_err"] <= 1e-6


def test_a_tampered_reference_fails_parity_with_the_onnx_cause(tmp_path):
    _refs(tmp_path, offset=1e-3)  # above atol 1e-5 + rtol 1e-4 * |y| for these outputs
    cases = _parity(tmp_path)
    assert {c["code"] for c in cases} == {"onnx-mismatch"}
    assert "max abs error 0.001" in cases[0]["message"]
    cause, _ = model_check.CAUSES["onnx-mismatch"]
    assert "ONNX Runtime outputs differ from the reference outputs" in cause


def test_without_references_parity_is_shapes_only(tmp_path):
    cases = _parity(tmp_path)
    assert [c["message"] for c in cases] == ["shapes only (no reference outputs)"] * 2
    assert all(c["passed"] and "max_abs_err" not in c for c in cases)


def test_a_batch_fixed_in_the_onnx_fails_the_second_batch(tmp_path):
    _refs(tmp_path)
    first, second = _parity(tmp_path, fixed_batch=True)
    assert first["passed"] and (second["passed"], second["code"]) == (False, "fixed-dim")


def _output(**kw) -> onnx_out.OnnxOutput:
    base = dict(path="inference.onnx", size=3, sha256="a" * 64, opset=13, paddle2onnx="2.1.0",
                image="r/x@sha256:" + "b" * 64, paddle_version="3.0.0", onnxruntime="1.32.0",
                parity="passed", rtol=1e-4, atol=1e-5, batches=(1, 3), max_abs_err=0.0)
    return onnx_out.OnnxOutput(**{**base, **kw})


def _record(onnx_case_ok: bool = True) -> model_check.CheckResult:
    cases = (model_check.Case("load", True), model_check.Case("inference/batch-3", True),
             model_check.Case("onnx/convert", True),
             model_check.Case("onnxruntime/batch-3", onnx_case_ok,
                              None if onnx_case_ok else "onnx-mismatch", "max abs error 0.1"))
    return model_check.CheckResult(
        model="m", image="r/x@sha256:" + "b" * 64, paddle_version="3.0.0",
        format="paddle-pir-json", pir_api=True, passed=onnx_case_ok, limited=False, rtol=1e-5,
        atol=1e-6, batches=(1, 3), inputs=(), cases=cases, created="t", duration_s=1.0,
        onnx=_output(parity="passed" if onnx_case_ok else "failed"))


def test_the_check_record_carries_the_onnx_output():
    record = _record()
    doc = json.loads(json.dumps(record.to_json()))
    assert doc["onnx"]["opset"] == 13 and doc["onnx"]["batches"] == [1, 3]
    assert model_check.CheckResult.from_json(doc) == record
    assert model_check.CheckResult.from_json({**doc, "onnx": None}).onnx is None


def test_an_onnx_failure_is_named_and_onnx_only_sees_it():
    record = _record(onnx_case_ok=False)
    error = record.error(onnx_only=True)
    assert "ONNX Runtime outputs differ" in error.cause and "onnxruntime/batch-3" in error.cause
    assert _record().error(onnx_only=True) is None
    assert b'failure message="the ONNX Runtime outputs differ' in record.junit()


@pytest.mark.parametrize("opset", [6, 20])
def test_an_opset_outside_paddle2onnx_range_is_refused_before_anything_runs(tmp_path, opset):
    with pytest.raises(ConfigError, match=f"onnx opset {opset}"):
        model_check.check_folder(None, tmp_path, image="x", onnx=True, opset=opset)


def test_the_manifest_lists_the_onnx_file_and_record():
    doc = {"schema_version": 1, "name": "m", "version": "1.0.0", "format": "paddle-pir-json",
           "model_prefix": "inference", "image": None, "paddle_version": None,
           "git_revision": None, "metrics": None, "created": "2026-01-01T00:00:00Z",
           "files": [{"path": "inference.json", "size": 1, "sha256": "c" * 64},
                     {"path": "inference.pdiparams", "size": 1, "sha256": "d" * 64}]}
    listed = am.with_onnx(doc, _output().to_json(), where="here")
    assert listed["files"][-1] == {"path": "inference.onnx", "size": 3, "sha256": "a" * 64}
    assert listed["onnx"]["paddle2onnx"] == "2.1.0" and listed["onnx"]["parity"] == "passed"
    assert len(am.with_onnx(listed, _output().to_json(), where="here")["files"]) == 3
    with pytest.raises(ConfigError, match="invalid manifest at onnx/parity"):
        am.with_onnx(doc, _output(parity="maybe").to_json(), where="here")


def _folder_with_onnx(tmp_path: Path, record: dict | None) -> Path:
    folder = tmp_path / "m"
    folder.mkdir()
    shutil.copy(DATA / "pir-linear.json", folder / "inference.json")
    (folder / "inference.pdiparams").write_bytes(b"\0" * 40)
    (folder / "inference.onnx").write_bytes(b"onnx")
    if record is not None:
        (folder / am.CHECK_JSON).write_text(json.dumps({"onnx": record}))
    return folder


def _plan(tmp_path, folder):
    return arts.plan_upload(FileStore(tmp_path / "store"), folder, name="m", version="1.0.0")


def test_upload_lists_the_onnx_its_check_recorded(tmp_path):
    sha = am.hash_file(_folder_with_onnx(tmp_path, None) / "inference.onnx").sha256
    shutil.rmtree(tmp_path / "m")
    folder = _folder_with_onnx(tmp_path, _output(sha256=sha, size=4).to_json())
    plan = _plan(tmp_path, folder)
    assert plan.manifest["onnx"]["sha256"] == sha and plan.manifest["onnx"]["opset"] == 13
    assert "inference.onnx" in [e.path for e in plan.put]


@pytest.mark.parametrize(("record", "cause"), [
    (None, "has no conversion record: check.json lists no ONNX output"),
    (_output().to_json(), "names another file (sha256 differs)"),
])
def test_upload_refuses_an_onnx_without_its_record(tmp_path, record, cause):
    with pytest.raises(ConfigError, match=re.escape(cause)) as e:
        _plan(tmp_path, _folder_with_onnx(tmp_path, record))
    assert "--onnx" in e.value.hint
    assert list(tmp_path.rglob(am.MANIFEST)) == []


def test_upload_refuses_an_onnx_whose_parity_failed(tmp_path):
    folder = _folder_with_onnx(tmp_path, None)
    sha = am.hash_file(folder / "inference.onnx").sha256
    (folder / am.CHECK_JSON).write_text(
        json.dumps({"onnx": _output(sha256=sha, size=4, parity="failed",
                                    max_abs_err=0.1).to_json()}))
    with pytest.raises(ConfigError, match="failed its ONNX Runtime parity check"):
        _plan(tmp_path, folder)


def test_the_pipeline_check_stage_takes_the_onnx_parameters():
    from pathlib import Path as P

    from paddlecd.errors import PipelineError
    from paddlecd.pipeline import spec as pipeline_spec

    def parse(params):
        return pipeline_spec.parse({"schema": 1, "stages": [
            {"stage": "promote"}, {"stage": "deploy", "with": {"job": "j.yaml"}},
            {"stage": "upload", "with": {"name": "m"}},
            {"stage": "check", "with": params}]}, P("pipelines/t.yaml"), "t")

    stage = parse({"onnx": True, "onnx_opset": 17}).stages[-1]
    assert stage.params == {"onnx": True, "onnx_opset": 17}
    with pytest.raises(PipelineError, match="onnx_opset"):
        parse({"onnx": True, "onnx_opset": 20})


def test_a_root_without_the_loader_is_named_before_any_container(tmp_path):
    """The release pipeline's project root once lacked smoke/: the container said only
    "can't open file '/smoke/workers/check_export.py'"."""
    from types import SimpleNamespace

    with pytest.raises(ConfigError, match="no smoke/workers/check_export.py under the project"):
        model_check.check_folder(SimpleNamespace(root=tmp_path), tmp_path, image="x")


def test_a_loader_that_died_after_loading_fails_the_check():
    """A trial: artifacts.check --batch 99999999999 ran the loader out of memory after batch 1;
    the check said "passed" and wrote a passing record with only the batch-1 cases."""
    loader = {"cases": [
        {"name": "load", "passed": True},
        {"name": "inference/batch-1", "passed": True},
        {"name": "jit.load/batch-1", "passed": True},
    ], "batches": [1, 4096], "rtol": 1e-5, "atol": 1e-6, "references": True, "paddle": "3.0.0"}
    record = model_check._record(loader, "m", "img@sha256:" + "a" * 64, "paddle-pir-json", 1.0, {})
    assert record.passed is False
    assert [c.name for c in record.failed] == ["inference/batch-4096", "jit.load/batch-4096"]
    refused = dict(loader, cases=[{"name": "load", "passed": False, "code": "legacy-in-pir"}])
    unloaded = model_check._record(refused, "m", "img", "paddle-program", 1.0, {})
    assert [c.name for c in unloaded.cases] == ["load"]  # nothing added when it never loaded
    stopped = dict(loader, cases=[*loader["cases"][:2], {"name": "jit.load/batch-1",
                                                         "passed": False, "code": "mismatch"}])
    failed = model_check._record(stopped, "m", "img", "paddle-pir-json", 1.0, {})
    assert [c.code for c in failed.failed] == ["mismatch"]  # the loader stopped at a failure


def test_a_batch_the_loader_fed_nothing_fails_parity(tmp_path):
    """The host makes no feeds of its own: without the loader's, each batch is a failed case."""
    cases = onnx_out.parity(_linear_onnx(tmp_path / "m.onnx"), tmp_path, feeds=None,
                            batches=(1, 3), rtol=onnx_out.ONNX_RTOL, atol=onnx_out.ONNX_ATOL)
    assert [(c["passed"], c["code"]) for c in cases] == [(False, "error")] * 2


def test_a_check_record_of_the_wrong_shape_is_named_as_check_json(tmp_path):
    """Trial 7: ``onnx.parity: true`` in check.json was refused as the "invalid manifest" of the
    model, a file not written yet; the broken file is the folder's check.json."""
    folder = _folder_with_onnx(tmp_path, None)
    sha = am.hash_file(folder / "inference.onnx").sha256
    record = {**_output(sha256=sha, size=4).to_json(), "parity": True}
    (folder / am.CHECK_JSON).write_text(json.dumps({"onnx": record}))
    with pytest.raises(ConfigError) as e:
        _plan(tmp_path, folder)
    assert e.value.cause.startswith(f"{folder / am.CHECK_JSON} (its onnx record)")
    assert "parity" in e.value.cause and "manifest of" not in e.value.cause


@pytest.mark.parametrize(("check_json", "fragment"), [
    ('{"onnx": "x"}', "(its onnx record): (top level) is the text 'x', not a mapping"),
    ('{"onnx": [1]}', "(top level) is a list of 1 item, not a mapping (an object)"),
    ('{"onnx": {}, "onnx": {}}', "not a check record (the key 'onnx' is given twice)"),
    ("{not json", "not a check record"),
])
def test_a_broken_check_json_is_named_not_a_traceback(tmp_path, check_json, fragment):
    """Trial 13: ``{"onnx": "x"}`` ended in AttributeError; ``onnx`` given twice (a failed
    record, then a passed one) took the last without a word."""
    folder = _folder_with_onnx(tmp_path, None)
    (folder / am.CHECK_JSON).write_text(check_json)
    with pytest.raises(ConfigError) as e:
        _plan(tmp_path, folder)
    assert str(folder / am.CHECK_JSON) in e.value.cause and fragment in e.value.cause
    assert list(tmp_path.rglob(am.MANIFEST)) == []


@pytest.mark.parametrize(("change", "fragment"), [
    ({"size": 999}, "size differs"),
    ({"paddle2onnx": ""}, "paddle2onnx"),
    ({"onnxruntime": "x; rm -rf"}, "onnxruntime"),
    ({"image": "not an image"}, "image"),
    ({"opset": 10 ** 30}, "opset"),
    ({"batches": []}, "batches"),
    ({"batches": [10 ** 9]}, "batches"),
    ({"rtol": float("nan")}, "rtol"),
    ({"max_abs_err": -1.0}, "max_abs_err"),
    ({"paddle_version": "3.0.0\n"}, "paddle_version"),
])
def test_an_onnx_record_that_is_not_the_files_is_refused(tmp_path, change, fragment):
    """Trial 13: a record with ``size: 999`` for a 4-byte file, an empty paddle2onnx, an image
    that is no reference and an opset of 10**30 were stored, signed and shown by
    artifacts.show."""
    folder = _folder_with_onnx(tmp_path, None)
    sha = am.hash_file(folder / "inference.onnx").sha256
    record = {**_output(sha256=sha, size=4).to_json(), **change}
    (folder / am.CHECK_JSON).write_text(json.dumps({"onnx": record}))
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        _plan(tmp_path, folder)
    assert list(tmp_path.rglob(am.MANIFEST)) == []


def test_the_schemas_highest_opset_is_the_pinned_onnxs():
    schema = json.loads((Path(am.__file__).parent.parent / "schemas"
                         / "artifact-manifest.schema.json").read_text())
    assert schema["properties"]["onnx"]["properties"]["opset"]["maximum"] == \
        onnx.defs.onnx_opset_version()


@pytest.mark.parametrize("fault", ["timeout", "cut record"])
def test_a_conversion_past_its_time_or_with_a_cut_record_fails_the_check_by_name(
        tmp_path, monkeypatch, fault):
    """A conversion stopped at verify.timeout was the engine's "did not finish" (exit 4), and
    a cut onnx.json a JSONDecodeError traceback. Without an engine: the container is a stand-in
    (the real conversion: tests/integration/test_artifacts_onnx_in_image.py)."""
    import contextlib
    from types import SimpleNamespace

    from paddlecd import engine
    from paddlecd.artifacts import scratch
    from paddlecd.errors import ContainerTimeout, ModelCheckError

    from support.project import project_settings

    settings = project_settings(tmp_path / "state", **{"verify.timeout": "7"})
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setattr(onnx_out, "wheelhouse", lambda *a, **k: tmp_path)
    monkeypatch.setattr(scratch, "folder", lambda *a: out)
    monkeypatch.setattr(engine, "container", lambda spec: contextlib.nullcontext(object()))

    def wait(c, *, timeout, on_line):
        if fault == "timeout":
            raise ContainerTimeout(f"container x did not finish within {timeout}s",
                                   logs="converting\nstill converting\n")
        (out / "onnx.json").write_text('{"opset": 1')
        return SimpleNamespace(exit_code=0, logs="")

    monkeypatch.setattr(engine, "wait", wait)
    export = SimpleNamespace(prefix="inference", format="paddle-pir-json", folder=tmp_path / "m")
    export.folder.mkdir()
    with pytest.raises(ModelCheckError) as e:
        model_check._onnx(settings, export, {"python": "3.10"}, tmp_path / "fed",
                          image="reg/x@sha256:" + "a" * 64, opset=13, env={}, rtol=1e-4,
                          atol=1e-5, on_line=None)
    if fault == "timeout":
        assert e.value.cause == (f"the ONNX conversion in reg/x@sha256:{'a' * 64} did not "
                                 "finish within 7s (verify.timeout); its container was stopped; "
                                 "its last lines: converting | still converting")
    else:
        assert e.value.cause.startswith(f"the ONNX conversion's record {out}/onnx.json is cut")

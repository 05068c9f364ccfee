"""``invoke artifacts.check`` in the real cpu image the suite builds (issue 13): real exports made
by Paddle 3.0.0 on this host (PIR, legacy with FLAGS_enable_pir_api=0 set before import, and the
``x.shape`` arithmetic that fixes a dynamic batch), checked inside the pushed image by digest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import cli_env, invoke, project_settings

_EXPORT = """
import os, sys
if sys.argv[1] == "legacy":
    os.environ["FLAGS_enable_pir_api"] = "0"  # before import: Paddle 3.x then saves a .pdmodel
import numpy as np
import paddle
from paddle.static import InputSpec

@paddle.jit.not_to_static
def rows(y, x):  # x.shape[0] is -1 while tracing: max() fixes the batch at 1 (Paddle #65106)
    return y.reshape([max(x.shape[0], 1), -1])

class FixedBatch(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.l = paddle.nn.Linear(4, 2)

    def forward(self, x):
        return rows(self.l(x), x)

for dest, kind, refs in zip(*[iter(sys.argv[2:])] * 3):
    paddle.seed(0)
    with paddle.utils.unique_name.guard():  # names as in a process of its own (linear_0.w_0)
        layer = FixedBatch() if kind == "fixed" else paddle.nn.Linear(4, 2)
        spec = [InputSpec([None, 4], "float32", "x")]
        paddle.jit.save(layer, dest + "/inference", input_spec=spec)
    if refs == "refs":
        x = np.random.default_rng(1).normal(size=(4, 4)).astype("float32")
        np.savez(dest + "/reference_inputs.npz", x=x)
        np.savez(dest + "/reference_outputs.npz", output_0=layer(paddle.to_tensor(x)).numpy())
"""


def _export(mode: str, *exports: tuple[Path, str, bool]) -> None:
    """``(dest, kind, refs)`` exports in one Paddle process (one import, ~2.5 s of CPU); ``mode``
    ``legacy`` turns PIR off before the import, for every export of the process."""
    for dest, _, _ in exports:
        dest.mkdir(parents=True)
    script = exports[0][0].parent / "export_model.py"  # a file: dy2static reads the layer's source
    script.write_text(_EXPORT)
    env = {k: v for k, v in os.environ.items() if k != "FLAGS_enable_pir_api"}
    argv = [str(x) for dest, kind, refs in exports for x in (dest, kind, "refs" if refs else "-")]
    subprocess.run([sys.executable, str(script), mode, *argv], check=True, capture_output=True,
                   env=env, timeout=300)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """This worker's exports (``artifacts.check`` writes its record beside each, so the workers
    do not share them): PIR ``pir``, ``fixed`` (the batch fixed at 1), ``norefs`` (no reference
    inputs), and ``legacy`` (a .pdmodel)."""
    root = tmp_path_factory.mktemp("exports")
    _export("pir", (root / "pir", "pir", True), (root / "fixed", "fixed", False),
            (root / "norefs", "pir", False))
    _export("legacy", (root / "legacy", "legacy", True))
    return {name: root / name for name in ("pir", "legacy", "fixed", "norefs")}


@pytest.fixture(scope="module")
def runtime(registry, main_state, paddle_image):
    """The cpu image pushed to ``registry``: its ``host/repo@sha256:…``."""
    from paddlecd.image import push as publish

    settings = project_settings(main_state, registry=registry)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DOCKER_CONFIG", str(registry.docker_config_dir))
        return publish.push(settings, "cpu", on_progress=None).reference


@pytest.fixture
def env(registry, main_state, tmp_path):
    return cli_env(registry, main_state, PADDLECD_STATE_DIR=str(tmp_path / "state"))


def _check(env, *args):
    return invoke("artifacts.check", *args, env=env, timeout=600)


def _record(folder: Path) -> dict:
    return json.loads((folder / "check.json").read_text())


def _one_line_error(r, cause: str) -> list[str]:
    lines = [x for x in r.stderr.splitlines() if x.startswith(("error: ", "hint: "))]
    assert len(lines) == 2 and cause in lines[0], r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    return lines


def test_a_pir_export_passes_at_two_batch_sizes(env, runtime, exports):
    r = _check(env, str(exports["pir"]), "--image", runtime)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith(f"passed: pir in {runtime} (Paddle 3.0.0, rtol 1e-05")
    doc = _record(exports["pir"])
    assert (doc["passed"], doc["limited"], doc["batches"]) == (True, False, [1, 3])
    assert doc["inputs"] == [{"name": "x", "shape": [-1, 4], "dtype": "float32"}]
    cases = {c["name"]: c for c in doc["cases"]}
    assert {
        "load",
        "inference/batch-1",
        "inference/batch-3",
        "jit.load/batch-1",
        "jit.load/batch-3",
    } == set(cases)
    assert cases["inference/batch-3"]["shapes"] == [[3, 2]]
    assert cases["jit.load/batch-3"]["max_abs_err"] <= 1e-6
    assert b"<testsuite" in (exports["pir"] / "check.junit.xml").read_bytes()
    # a trial: every check left its loader's scratch folder (mode 0777) in the state folder
    assert list((Path(env["PADDLECD_STATE_DIR"]) / "check").glob("inference-*")) == []


def test_a_check_past_verify_timeout_is_the_checks_failure_not_the_engines(
        env, runtime, exports):
    """A check stopped at verify.timeout was the engine's "container … did not finish within
    1s" (exit 4) with nothing of its output; it is the model check's failure (exit 6), naming
    the setting, and no check record is written. (1 s: a container importing Paddle takes more.)
    """
    before = {p.name: p.read_bytes() for p in exports["norefs"].iterdir()}
    r = _check({**env, "PADDLECD_VERIFY_TIMEOUT": "1"}, str(exports["norefs"]), "--image", runtime)
    assert r.returncode == 6, r.stderr[-3000:]
    cause, hint = _one_line_error(r, f"the model check in {runtime} did not finish within 1s "
                                     "(verify.timeout); its container was stopped")
    assert hint == "hint: raise verify.timeout (PADDLECD_VERIFY_TIMEOUT), or check a smaller model"
    assert {p.name: p.read_bytes() for p in exports["norefs"].iterdir()} == before


def test_a_legacy_export_fails_under_pir_unless_the_flag_is_set(env, runtime, exports):
    assert (exports["legacy"] / "inference.pdmodel").is_file()
    r = _check(env, str(exports["legacy"]), "--image", runtime)
    assert r.returncode == 6
    _, hint = _one_line_error(r, "a Paddle 2.x program (.pdmodel) in a PIR-only Paddle 3.x runtime")
    assert "FLAGS_enable_pir_api=0" in hint and "#75145" in hint
    assert [c["code"] for c in _record(exports["legacy"])["cases"] if not c["passed"]] == [
        "legacy-in-pir"
    ]

    r = _check(env, str(exports["legacy"]), "--image", runtime, "--no-pir")
    assert r.returncode == 0, r.stderr[-3000:]
    doc = _record(exports["legacy"])
    assert doc["pir_api"] is False and doc["flags"] == {"FLAGS_enable_pir_api": "0"}
    assert doc["inputs"] == [{"name": "x", "shape": [-1, 4], "dtype": "float32"}]


def test_shape_arithmetic_on_a_dynamic_batch_fails_the_second_batch(env, runtime, exports):
    r = _check(env, str(exports["fixed"]), "--image", runtime)
    assert r.returncode == 6
    _, hint = _one_line_error(r, "a dynamic input dimension became fixed or negative")
    assert "paddle.shape(x)" in hint and "#65106" in hint
    failed = {c["name"]: c for c in _record(exports["fixed"])["cases"] if not c["passed"]}
    assert set(failed) == {"inference/batch-3", "jit.load/batch-3"}
    assert failed["inference/batch-3"]["shapes"] == [[1, 6]]


def test_without_references_the_check_is_load_and_shapes_only(env, runtime, exports):
    """Trial 4: ``--rtol 0 --atol 0`` were taken silently and the result line named them as if
    outputs had been compared within them."""
    r = _check(env, str(exports["norefs"]), "--image", runtime, "--rtol", "0", "--atol", "0")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("passed (load + shapes only):") and "rtol" not in r.stdout
    assert "warning: --rtol/--atol: " in r.stderr and "has no reference outputs" in r.stderr
    assert _record(exports["norefs"])["limited"] is True


@pytest.mark.parametrize("mode", ["folder", "params"])
def test_an_export_the_image_s_user_cannot_read_is_named_so(env, runtime, exports, tmp_path,
                                                            mode):
    """Trial 15: an export folder of mode 700 (or files of 600) owned by root on the host was
    "the export has no <prefix>.pdiparams", hint "upload the whole folder": the image runs as
    its own user, who cannot read them."""
    import shutil

    folder = tmp_path / "private"
    shutil.copytree(exports["pir"], folder)
    (folder / "check.json").unlink(missing_ok=True)
    (folder if mode == "folder" else folder / "inference.pdiparams").chmod(0o700 if mode ==
                                                                           "folder" else 0o600)
    r = _check(env, str(folder), "--image", runtime)
    assert r.returncode == 6, r.stderr[-3000:]
    _, hint = _one_line_error(r, "not readable by the image's user")
    assert "chmod -R a+rX" in hint
    (case,) = [c for c in _record(folder)["cases"] if not c["passed"]]
    shown = "/model" if mode == "folder" else "/model/inference.pdiparams"
    assert case["code"] == "unreadable" and case["message"].startswith(f"{shown} is not readable")


def test_not_an_export_changes_nothing(env, runtime, tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"x")
    r = _check(env, str(tmp_path), "--image", runtime)
    assert r.returncode == 2
    _one_line_error(r, "is not a paddle.jit.save export")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state", "weights.bin"] or sorted(
        p.name for p in tmp_path.iterdir()
    ) == ["weights.bin"]


def test_an_image_without_paddle(env, registry, runtime, exports, tmp_path):
    ref = f"{registry.host}/paddlecd/no-paddle:t1"
    (tmp_path / "Dockerfile").write_text(
        f"FROM {runtime}\nUSER root\nRUN rm -rf /opt/paddle/lib/python3.11/site-packages/paddle\n"
        "USER paddle\n"
    )
    docker = {
        **os.environ,
        "DOCKER_CONFIG": str(registry.docker_config_dir),
        "DOCKER_BUILDKIT": "0",
    }
    for argv in (["build", "-q", "-t", ref, str(tmp_path)], ["push", ref]):
        done = subprocess.run(
            ["/usr/bin/docker", *argv], env=docker, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr
    r = _check(env, str(exports["pir"]), "--image", ref)
    assert r.returncode == 6
    _one_line_error(r, "the image has no Paddle")


def test_a_stored_model_records_the_images_paddle_and_its_check(env, runtime, exports, tmp_path):
    r = invoke(
        "upload",
        "--model-dir",
        str(exports["pir"]),
        "--name",
        "lin",
        "--version",
        "1.0.0",
        "--image",
        runtime,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    stored = tmp_path / "state" / "artifacts" / "lin" / "1.0.0"
    manifest = json.loads((stored / "manifest.json").read_text())
    assert (manifest["paddle_version"], manifest["paddle_version_from"]) == ("3.0.0", "image")
    assert {"reference_inputs.npz", "reference_outputs.npz"} <= {
        f["path"] for f in manifest["files"]
    }

    r = _check(env, "lin", "--image", runtime)  # no version: the highest one
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads((stored / "check.json").read_text())["model"] == "lin 1.0.0"
    r = invoke("artifacts.list", "lin", "--json", env=env, timeout=120)
    assert json.loads(r.stdout)["versions"][0]["check"]["status"] == "passed"


def test_a_model_in_production_that_the_candidate_cannot_load_refuses_its_promotion(
        env, registry, runtime, exports, tmp_path, monkeypatch):
    """release.models (issue 25): a legacy export users serve, checked in the candidate image as
    verify --models does; the failure is named, and the upgrade gate refuses on it."""
    from paddlecd.artifacts.gate import check_models
    from paddlecd.release import gates
    from paddlecd.verify.attestation import VerifiedAttestation

    r = invoke("upload", "--model-dir", str(exports["legacy"]), "--name", "leg", "--version",
               "2.6.0", "--image", runtime, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    monkeypatch.setenv("DOCKER_CONFIG", str(registry.docker_config_dir))
    settings = project_settings(tmp_path / "state", registry=registry, **{
        "release.models": "leg", "release.trusted_keys": env.get("PADDLECD_RELEASE_TRUSTED_KEYS")
        or None})
    [result] = check_models(settings, runtime)
    assert (result.model, result.passed, result.code) == ("leg@2.6.0", False, "legacy-in-pir")
    att = VerifiedAttestation(digest=runtime.split("@")[1], name="r", keyid="k", key_source="f",
                              predicate={"models": [result.to_json()]})
    [problem] = gates.model_problems(settings, att)
    assert problem.startswith("leg@2.6.0: legacy-in-pir (a Paddle 2.x program")
    assert not (tmp_path / "state" / "artifacts" / "leg" / "2.6.0" / "check.json").exists()

"""artifacts.show on a file:// store: the manifest and the stored check of one version,
as lines for people and as one JSON document. (The S3 side: tests/integration/
test_artifacts_onnx_in_image.py, against Ceph RGW.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from paddlecd.artifacts import manifest as am
from paddlecd.artifacts import show as shown
from paddlecd.artifacts import transfer as arts
from paddlecd.artifacts.storage.file import FileStore
from paddlecd.errors import ConfigError, StorageError

DATA = Path(__file__).parents[1] / "data" / "artifacts"
IMAGE = "reg.example/paddlecd/release@sha256:" + "b" * 64


def _stored(tmp_path: Path, version: str = "1.4.0", *, onnx: bool = False) -> FileStore:
    folder = tmp_path / f"m-{version}"
    folder.mkdir()
    shutil.copy(DATA / "pir-linear.json", folder / "inference.json")
    (folder / "inference.pdiparams").write_bytes(b"\0" * 40)
    if onnx:
        (folder / "inference.onnx").write_bytes(b"onnx bytes")
        entry = am.hash_file(folder / "inference.onnx")
        record = {"path": "inference.onnx", "size": entry.size, "sha256": entry.sha256,
                  "opset": 13, "paddle2onnx": "2.1.0", "image": IMAGE, "paddle_version": "3.0.0",
                  "onnxruntime": "1.32.0", "parity": "passed", "rtol": 1e-4, "atol": 1e-5,
                  "batches": [1, 3], "max_abs_err": 2.5e-7}
        (folder / am.CHECK_JSON).write_text(json.dumps({"onnx": record}))
    store = FileStore(tmp_path / "store")
    plan = arts.plan_upload(store, folder, name="ocr-det", version=version, image=IMAGE,
                            image_paddle="3.0.0", metrics=None)
    arts.upload(store, plan)
    return store


def test_show_prints_the_manifest_and_says_what_is_missing(tmp_path):
    record = shown.show(_stored(tmp_path), "ocr-det", "1.4.0")
    text = "\n".join(record.lines())
    assert text.startswith(f"ocr-det 1.4.0  file://{tmp_path / 'store'}/ocr-det/1.4.0\n")
    assert "format      paddle-pir-json (prefix inference)" in text
    assert "paddle      3.0.0 (from the image)" in text
    assert f"image       {IMAGE}" in text
    assert "input_spec  x [-1, 4] float32" in text
    assert "inference.pdiparams  40 B  sha256:" in text
    assert "onnx        - (artifacts.check NAME --image IMAGE --onnx adds one)" in text
    assert "check       - (never checked" in text


def _check_record(**change) -> dict:
    from paddlecd.artifacts import check as model_check

    cases = (model_check.Case("load", True),
             model_check.Case("onnxruntime/batch-3", False, "onnx-mismatch", "max abs error 1"))
    record = model_check.CheckResult(
        model="ocr-det 1.4.0", image=IMAGE, paddle_version="3.0.0", format="paddle-pir-json",
        pir_api=True, passed=False, limited=False, rtol=1e-5, atol=1e-6, batches=(3,),
        inputs=(), cases=cases, created="2026-12-03T00:00:00Z", duration_s=1.0)
    return {**record.to_json(), **change}


def test_show_lists_the_onnx_output_and_the_stored_check(tmp_path):
    store = _stored(tmp_path, onnx=True)
    store.put_bytes(json.dumps(_check_record()).encode(), f"ocr-det/1.4.0/{am.CHECK_JSON}")
    record = shown.show(store, "ocr-det")  # no version: the highest complete one
    text = "\n".join(record.lines())
    assert ("onnx        inference.onnx  opset 13, paddle2onnx 2.1.0 in " + IMAGE) in text
    assert "onnxruntime 1.32.0 parity passed (rtol 0.0001, atol 1e-05, batches 1,3, " \
           "max abs error 2.5e-07)" in text
    assert "1/2 cases passed; failed: onnxruntime/batch-3 (onnx-mismatch)" in text
    doc = json.loads(json.dumps(record.to_json()))
    assert set(doc) == {"url", "name", "version", "manifest", "check", "signature"}
    assert doc["manifest"]["onnx"]["opset"] == 13 and doc["check"]["status"] == "failed"


def test_show_takes_the_highest_version_and_an_unreadable_check_says_so(tmp_path):
    store = _stored(tmp_path, "1.4.0")
    folder = tmp_path / "m-1.4.0"
    plan = arts.plan_upload(store, folder, name="ocr-det", version="1.10.0")
    arts.upload(store, plan)
    store.put_bytes(b"not json", f"ocr-det/1.10.0/{am.CHECK_JSON}")
    record = shown.show(store, "ocr-det")
    assert record.version == "1.10.0" and record.check["status"] == "invalid"
    assert "invalid check.json" in record.lines()[-1]


def test_versions_of_equal_precedence_are_listed_in_one_order_and_none_is_picked_as_highest(
        tmp_path):
    """Trial 18: 1.0.0, 1.0.0+b1 and 1.0.0+b2 are of equal SemVer precedence (§10); the
    "highest" version artifacts.show and artifacts.check took was whichever a set gave last,
    a different one from run to run. The list is ordered by build identifiers (numeric ones
    numerically), and a default that would pick among equals is refused, naming them."""
    from paddlecd.artifacts import check as model_check

    store = _stored(tmp_path, "1.0.0")
    folder = tmp_path / "m-1.0.0"
    for version in ("1.0.0+b10", "1.0.0+b2", "1.0.0+7", "0.9.0+z"):
        arts.upload(store, arts.plan_upload(store, folder, name="ocr-det", version=version))
    listed = [v["version"] for v in arts.list_model(store, "ocr-det")]
    assert listed == ["0.9.0+z", "1.0.0", "1.0.0+7", "1.0.0+b10", "1.0.0+b2"]
    for pick in (lambda: shown.show(store, "ocr-det"),
                 lambda: model_check._latest(arts.list_model(store, "ocr-det"),
                                             store.url, "ocr-det")):
        with pytest.raises(ConfigError) as e:
            pick()
        assert "no single highest version: 1.0.0, 1.0.0+7, 1.0.0+b10 and 1 more" in e.value.cause
        assert e.value.hint == "name one: ocr-det@1.0.0+b2"
    assert shown.show(store, "ocr-det", "1.0.0+b2").version == "1.0.0+b2"
    arts.upload(store, arts.plan_upload(store, folder, name="ocr-det", version="1.0.1"))
    assert shown.show(store, "ocr-det").version == "1.0.1"  # equal ones below the top: no matter


def test_version_order_is_semver_precedence_then_build_identifiers():
    ordered = ["1.0.0-rc.1", "1.0.0-rc.1+b", "1.0.0", "1.0.0+1", "1.0.0+2", "1.0.0+10",
               "1.0.0+10.a", "1.0.0+a", "1.0.0+a.1", "1.0.1"]
    assert sorted(reversed(ordered), key=am.version_order) == ordered
    assert am.highest(["1.0.0+b", "1.0.1-rc.1", "0.1.0"], where="s/m") == "1.0.1-rc.1"


@pytest.mark.parametrize(("change", "why"), [
    (None, "not a check record (no 'model')"),  # {"status": "passed"}: was KeyError traceback
    ({"status": "passed"}, "status 'passed' and passed False, but 1 of 2 cases failed"),
    ({"passed": True, "status": "passed"}, "but 1 of 2 cases failed"),
    ("twice", "the key 'status' is given twice"),
])
def test_a_stored_check_record_that_contradicts_itself_is_invalid_not_a_traceback(
        tmp_path, change, why):
    """Trial 13: check.json ``{"status": "passed"}`` was a KeyError traceback in artifacts.show;
    a record whose case failed but whose status said passed was shown as passed; a second
    ``status`` key was taken unsaid. Each is shown (and listed) as invalid, naming why."""
    store = _stored(tmp_path)
    if change is None:
        raw = b'{"status": "passed"}'
    elif change == "twice":
        raw = json.dumps(_check_record()).encode()[:-1] + b', "status": "passed"}'
    else:
        raw = json.dumps(_check_record(**change)).encode()
    store.put_bytes(raw, f"ocr-det/1.4.0/{am.CHECK_JSON}")
    record = shown.show(store, "ocr-det", "1.4.0")
    assert record.check["status"] == "invalid" and why in record.check["why"]
    assert why in record.lines()[-1]
    assert arts.list_model(store, "ocr-det")[0]["check"]["status"] == "invalid"


@pytest.mark.parametrize(("arg", "want"), [
    ("ocr-det", ("ocr-det", None)),
    ("ocr-det@1.4.0", ("ocr-det", "1.4.0")),
    ("s3://models/paddle/ocr-det@2.0.0-rc.1", ("s3://models/paddle/ocr-det", "2.0.0-rc.1")),
])
def test_name_at_version(arg, want):
    assert shown.split_version(arg) == want


@pytest.mark.parametrize(("arg", "cause"), [("ocr-det@", "no version after '@'"),
                                            ("ocr-det@latest", "not semver")])
def test_a_bad_version_is_one_line(arg, cause):
    with pytest.raises(ConfigError, match=cause):
        shown.split_version(arg)


def test_an_unknown_version_or_model_is_a_storage_error(tmp_path):
    store = _stored(tmp_path)
    with pytest.raises(StorageError, match="no model at .*ocr-det/9.9.9/"):
        shown.show(store, "ocr-det", "9.9.9")
    with pytest.raises(StorageError, match="no model named 'other'"):
        shown.show(store, "other")


def test_check_and_show_take_each_others_model_form(tmp_path):
    """Trial 7: artifacts.check took <name>/<version> and refused name@version as "invalid model
    name"; artifacts.show took name@version and refused name/version as "does not end in
    <name>". Both forms name one version, and each task takes both."""
    from paddlecd import config
    from paddlecd.cli import artifacts as cli

    from support import ROOT

    s = config.load({"state_dir": str(tmp_path)}, root=ROOT, environ={})
    store = f"file://{tmp_path / 'store'}"
    assert cli._model_and_version(f"{store}/linear@1.0.0-rc1", s) == (store, ["linear",
                                                                              "1.0.0-rc1"])
    assert cli._model_and_version("linear@1.0.0", s)[1] == ["linear", "1.0.0"]
    assert cli._names_a_version(f"{store}/linear/1.0.0-rc1")
    assert not cli._names_a_version(f"{store}/linear") and not cli._names_a_version("linear")


def test_a_version_holding_another_versions_manifest_is_listed_damaged(tmp_path):
    """Trial 9: 1.0.0's manifest.json copied alone into 2.0.0/ was listed as a complete 2.0.0 of
    5 files, exit 0, while show and download refused it ("is the manifest of … 1.0.0")."""
    store = _stored(tmp_path, "1.4.0")
    store.put_bytes((tmp_path / "store" / "ocr-det" / "1.4.0" / am.MANIFEST).read_bytes(),
                    f"ocr-det/2.0.0/{am.MANIFEST}")
    listed = {v["version"]: v for v in arts.list_versions(store, "ocr-det")}
    assert listed["1.4.0"]["complete"] and not listed["1.4.0"]["damaged"]
    assert not listed["2.0.0"]["complete"] and listed["2.0.0"]["damaged"]
    assert "is the manifest of ocr-det 1.4.0" in listed["2.0.0"]["problem"]


def test_a_check_whose_model_is_uploaded_again_meanwhile_stores_no_result(tmp_path,
                                                                          monkeypatch):
    """Trial 9: ``artifacts.check m/1.0.0`` racing ``upload --overwrite`` of m/1.0.0 stored
    "passed" beside the new files, which do not load. The manifest is read again before the
    result is stored; a changed one stores nothing and says so."""
    from paddlecd import config
    from paddlecd.artifacts import check
    from paddlecd.signing import keys

    from support import ROOT

    store = _stored(tmp_path, "1.4.0")
    settings = config.load({"state_dir": str(tmp_path / "state")}, root=ROOT, environ={})
    monkeypatch.setattr(keys, "trusted", lambda s: None)  # unsigned here: not what is tested

    def checked_while_overwritten(settings, folder, **kw):
        (folder / am.CHECK_JSON).write_text("{}")
        (folder / am.CHECK_JUNIT).write_text("<testsuite/>")
        other = tmp_path / "m-other"
        shutil.copytree(tmp_path / "m-1.4.0", other)
        (other / "inference.pdiparams").write_bytes(b"\1" * 40)
        arts.upload(store, arts.plan_upload(store, other, name="ocr-det", version="1.4.0",
                                            image=IMAGE, image_paddle="3.0.0", metrics=None,
                                            overwrite=True))
        return type("Passed", (), {"onnx": None, "passed": True})()

    monkeypatch.setattr(check, "check_folder", checked_while_overwritten)
    with pytest.raises(StorageError, match="changed during the check"):
        check.check_stored(settings, store, "ocr-det", "1.4.0", image=IMAGE)
    assert store.get_bytes(f"ocr-det/1.4.0/{am.CHECK_JSON}") is None


def test_an_unchanged_upload_reports_what_is_stored(tmp_path):
    """Trial 9: ``upload --json`` of an unchanged version run without --image said
    ``"image_digest": null`` while the stored manifest names the image."""
    store = _stored(tmp_path, "1.4.0")
    plan = arts.plan_upload(store, tmp_path / "m-1.4.0", name="ocr-det", version="1.4.0")
    assert plan.action == "unchanged"
    record = arts.uploaded(store, plan, executed=False)
    assert record.image_digest == IMAGE.split("@")[1] and record.files >= 2


def test_a_download_removes_what_a_killed_download_left_beside_it(tmp_path):
    """Trial 9: kill -9 of artifacts.download left ``.<dest>.XXXX/`` with a partial file next to
    the destination, and no later run removed it. The temp folder carries its pid; the next
    download into the same place removes a dead one's and keeps a live one's."""
    import os
    import subprocess

    store = _stored(tmp_path, "1.4.0")
    dead = subprocess.Popen(["sleep", "60"])
    dead.kill()
    dead.wait()
    (tmp_path / "out").mkdir()
    killed = tmp_path / "out" / f".dl.{dead.pid}.abc.download"
    live = tmp_path / "out" / f".dl.{os.getpid()}.def.download"
    for folder in (killed, live):
        folder.mkdir()
        (folder / "inference.pdiparams").write_bytes(b"\0" * 7)
    arts.download(store, "ocr-det", "1.4.0", tmp_path / "out" / "dl")
    assert not killed.exists() and live.exists()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(["dl", live.name])


def test_a_version_folder_linked_to_another_is_listed_as_damaged_not_left_out(tmp_path):
    """Trial 20: ``ln -s …/9.0.0 …/9.0.5`` — artifacts.show refused 9.0.5 ("copied or changed
    by hand") but artifacts.list left it out and exited 0."""
    store = _stored(tmp_path, "1.4.0")
    (tmp_path / "store" / "ocr-det" / "1.4.5").symlink_to(tmp_path / "store" / "ocr-det" / "1.4.0")
    listed = {v["version"]: v for v in arts.list_model(store, "ocr-det")}
    assert set(listed) == {"1.4.0", "1.4.5"}
    assert listed["1.4.5"]["damaged"] and "is the manifest of ocr-det 1.4.0" in \
        listed["1.4.5"]["problem"]
    assert listed["1.4.0"]["complete"]

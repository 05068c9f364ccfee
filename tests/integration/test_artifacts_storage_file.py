"""Artifacts on the file:// store (the embedded default) with real jit.save exports: the same layout
and manifest rules as S3."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest

from paddlecd.artifacts import transfer as arts
from paddlecd.artifacts.storage import FileStore
from paddlecd.errors import ModelSignatureError, StorageError


@pytest.fixture
def store(tmp_path):
    return FileStore(tmp_path / "store")


def _files(store, version="1.4.0"):
    return sorted(p.name for p in (store.root / "ocr-det" / version).iterdir())


def _upload(store, model_dir, version="1.4.0", **kw):
    return arts.upload(
        store, arts.plan_upload(store, model_dir, name="ocr-det", version=version, **kw)
    )


def test_same_rules_as_s3(store, jit_exports, tmp_path):
    _upload(store, jit_exports["tiny"])
    assert _files(store) == ["inference.json", "inference.pdiparams", "manifest.json"]
    manifest = store.root / "ocr-det" / "1.4.0" / "manifest.json"
    mtime = manifest.stat().st_mtime_ns
    assert (
        _upload(store, jit_exports["tiny"]).bytes_to_move == 0
        and manifest.stat().st_mtime_ns == mtime
    )
    with pytest.raises(StorageError, match="already holds a different model"):
        _upload(store, jit_exports["tiny2"])
    assert manifest.stat().st_mtime_ns == mtime
    _upload(store, jit_exports["tiny2"], overwrite=True)
    new = hashlib.sha256((jit_exports["tiny2"] / "inference.pdiparams").read_bytes()).hexdigest()
    assert json.loads(manifest.read_text())["files"][1] == {
        "path": "inference.pdiparams",
        "size": 90,
        "sha256": new,
    }
    arts.download(store, "ocr-det", "1.4.0", tmp_path / "dl")
    assert (tmp_path / "dl" / "inference.pdiparams").read_bytes() == (
        jit_exports["tiny2"] / "inference.pdiparams"
    ).read_bytes()


def test_interrupted_upload_then_rerun(store, jit_exports):
    plan = arts.plan_upload(store, jit_exports["big"], name="ocr-det", version="2.0.0")

    def fail(_n):
        raise ConnectionAbortedError("injected")

    plan.put.reverse()  # the big parameters file first: it fails half-written
    with pytest.raises(ConnectionAbortedError):
        arts.upload(store, plan, progress=fail)
    assert _files(store, "2.0.0") == []  # the temp file was removed, no manifest
    (store.root / "ocr-det" / "2.0.0" / ".inference.pdiparams.x.tmp").write_bytes(
        b"killed -9 leftover"
    )
    plan = arts.plan_upload(store, jit_exports["big"], name="ocr-det", version="2.0.0")
    assert plan.stale == ["ocr-det/2.0.0/.inference.pdiparams.x.tmp"]
    arts.upload(store, plan)
    assert _files(store, "2.0.0") == ["inference.json", "inference.pdiparams", "manifest.json"]
    assert arts.list_versions(store, "ocr-det")[0]["bytes"] == sum(
        p.stat().st_size for p in jit_exports["big"].iterdir()
    )


def test_corrupted_file_detected_on_download(store, jit_exports, tmp_path):
    _upload(store, jit_exports["tiny"])
    (store.root / "ocr-det" / "1.4.0" / "inference.json").write_text("{}")
    with pytest.raises(ModelSignatureError,  # exit 6: a verification failure
                       match="integrity check failed for file://.*/inference.json"):
        arts.download(store, "ocr-det", "1.4.0", tmp_path / "dl")
    assert not (tmp_path / "dl").exists()


# ------------------------------------------------------- concurrent uploads, full disk


def _race_while_first_writes(store, first_dir, second_dir, version="3.0.0"):
    """Upload ``first_dir``; while its first bytes move, upload ``second_dir`` to the same version
    from another thread. Returns (first's plan or exception, second's exception or plan)."""
    writing, second_done, out = threading.Event(), threading.Event(), {}

    def hold(_n):
        writing.set()
        assert second_done.wait(30), "the second upload never finished"

    def first():
        try:
            plan = arts.plan_upload(store, first_dir, name="ocr-det", version=version)
            out["first"] = arts.upload(store, plan, progress=hold)
        except Exception as e:  # noqa: BLE001 (reported to the test)
            out["first"] = e

    t = threading.Thread(target=first)
    t.start()
    assert writing.wait(30), "the first upload never started writing"
    try:
        out["second"] = _upload(store, second_dir, version=version)
    except Exception as e:  # noqa: BLE001
        out["second"] = e
    second_done.set()
    t.join(30)
    return out["first"], out["second"]


def test_second_upload_of_a_version_while_the_first_writes_fails_and_touches_nothing(
    store, jit_exports, tmp_path
):
    first, second = _race_while_first_writes(store, jit_exports["tiny"], jit_exports["tiny2"])
    assert isinstance(first, arts.UploadPlan) and first.action == "create", first
    assert isinstance(second, arts.ConflictError) and second.exit_code == 8
    assert re.fullmatch(
        r"file://.*/ocr-det/3\.0\.0/ is being uploaded by another process "
        r"\(\S+ pid \d+ since \S+Z\)",
        second.cause,
    ), second.cause
    arts.download(store, "ocr-det", "3.0.0", tmp_path / "dl")  # sha256-verified: the first's
    assert (tmp_path / "dl" / "inference.pdiparams").read_bytes() == (
        jit_exports["tiny"] / "inference.pdiparams"
    ).read_bytes()
    assert not (store.root / ".claims" / "ocr-det" / "3.0.0.lock").exists()  # released


def test_upload_planned_before_another_finished_is_refused(store, jit_exports, tmp_path):
    late = arts.plan_upload(store, jit_exports["tiny2"], name="ocr-det", version="3.0.0")
    _upload(store, jit_exports["tiny"], version="3.0.0")
    with pytest.raises(arts.ConflictError, match="by another process while this one planned"):
        arts.upload(store, late)
    arts.download(store, "ocr-det", "3.0.0", tmp_path / "dl")
    assert (tmp_path / "dl" / "inference.pdiparams").read_bytes() == (
        jit_exports["tiny"] / "inference.pdiparams"
    ).read_bytes()


def test_exclusive_write_never_replaces(store):
    store.put_bytes(b"first", "m/1.0.0/manifest.json", exclusive=True)
    with pytest.raises(arts.ConflictError, match="written by another upload"):
        store.put_bytes(b"second", "m/1.0.0/manifest.json", exclusive=True)
    assert store.get_bytes("m/1.0.0/manifest.json") == b"first"
    assert [o.key for o in store.list("m/")] == ["m/1.0.0/manifest.json"]  # no temp file left


_RACER = """
import sys
from pathlib import Path
from paddlecd.artifacts import transfer as t
from paddlecd.artifacts.storage import FileStore
store = FileStore(Path(sys.argv[1]))
plan = t.plan_upload(store, Path(sys.argv[2]), name="ocr-det", version="4.0.0")
Path(sys.argv[3]).touch()
while not Path(sys.argv[4]).exists():
    pass
try:
    t.upload(store, plan)
except t.StorageError as e:
    print(type(e).__name__, e.exit_code, e.cause)
    sys.exit(e.exit_code)
print("uploaded")
"""


def test_two_processes_at_once_exactly_one_wins(store, jit_exports, tmp_path):
    """Two real processes, both planned (no manifest yet), released at the same instant."""
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _RACER,
                str(store.root),
                str(jit_exports[m]),
                str(tmp_path / f"ready-{m}"),
                str(go),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for m in ("tiny", "tiny2")
    ]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready-{m}").exists() for m in ("tiny", "tiny2")):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a racer died"
        time.sleep(0.01)
    go.touch()
    results = [(p.wait(60), p.stdout.read()) for p in procs]
    assert sorted(rc for rc, _ in results) == [0, 8], results
    winner = ("tiny", "tiny2")[[rc for rc, _ in results].index(0)]
    assert "ConflictError 8" in next(out for rc, out in results if rc)
    arts.download(store, "ocr-det", "4.0.0", tmp_path / "dl")
    assert (tmp_path / "dl" / "inference.pdiparams").read_bytes() == (
        jit_exports[winner] / "inference.pdiparams"
    ).read_bytes()


def test_listing_shows_interrupted_and_broken_versions_as_incomplete(store, jit_exports):
    _upload(store, jit_exports["tiny"], version="1.0.0")
    (store.root / "ocr-det" / "1.1.0").mkdir(parents=True)
    (store.root / "ocr-det" / "1.1.0" / ".inference.json.x.tmp").write_bytes(b"killed -9")
    (store.root / "ocr-det" / "1.2.0").mkdir()
    (store.root / "ocr-det" / "1.2.0" / "manifest.json").write_text("{not json")
    listed = arts.list_versions(store, "ocr-det")
    assert [(v["version"], v["complete"]) for v in listed] == [
        ("1.0.0", True),
        ("1.1.0", False),
        ("1.2.0", False),
    ]
    assert all(set(v) == set(listed[0]) for v in listed)  # one shape: never a KeyError
    assert "no manifest.json" in listed[1]["problem"] and "not JSON" in listed[2]["problem"]
    assert listed[1]["metrics"] is None and listed[0]["problem"] is None


@pytest.fixture
def tiny_disk(tmp_path):
    """A real 256 KiB tmpfs (needs root, as CI and the dev machines run)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "tiny-disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_full_disk_is_a_storage_error_naming_the_path_and_leaves_no_temp_file(
    tiny_disk, jit_exports
):
    store = FileStore(tiny_disk / "store")
    plan = arts.plan_upload(store, jit_exports["big"], name="ocr-det", version="5.0.0")
    with pytest.raises(StorageError) as e:
        arts.upload(store, plan)
    assert e.value.exit_code == 8
    where = rf"{tiny_disk}/store/ocr-det/5\.0\.0/inference\.\w+"
    cause = e.value.cause
    assert re.fullmatch(rf"writing {where}: no space left on the device", cause), cause
    assert "free space" in e.value.hint
    left = [p.relative_to(tiny_disk).as_posix() for p in tiny_disk.rglob("*") if p.is_file()]
    # whole files only: no temp file, no claim, no manifest
    assert left == ["store/ocr-det/5.0.0/inference.json"]
    assert arts.list_versions(store, "ocr-det")[0]["complete"] is False


def test_a_full_state_folder_loses_the_stage_log_not_the_upload(tiny_disk, jit_exports,
                                                                 tmp_path):
    """Trial 7: with the state folder on a full disk, an upload stored the whole model, then
    failed (exit 2) closing its stage log, with "df -h ." (the working folder) as the hint. The
    log is diagnostics: its loss is said once, naming it, and the command's result stands."""
    from paddlecd.signing import keys

    from support import clean_env, invoke

    state = tiny_disk / "state"
    keys.keygen(state / "keys")  # what the upload signs with, made while there was room
    with contextlib.suppress(OSError), open(tiny_disk / "filler", "wb") as f:
        f.write(b"\0" * (1 << 20))  # the rest of the 256 KiB
    run = invoke("upload", "--model-dir", str(jit_exports["tiny"]), "--name", "ocr-det",
                 "--version", "1.0.0", "--to", f"file://{tmp_path / 'store'}",
                 env=clean_env(PADDLECD_STATE_DIR=str(state)))
    assert run.returncode == 0, run.stderr
    assert f"warning: the stage log {state}/logs/upload-" in run.stderr
    assert f"hint: free space there (df -h {state}/logs)" in run.stderr
    assert (tmp_path / "store" / "ocr-det" / "1.0.0" / "manifest.json").is_file()

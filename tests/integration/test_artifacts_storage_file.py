"""Artifacts on the file:// store (the embedded default) with real jit.save exports: the same layout
and manifest rules as S3 (issue 4)."""

from __future__ import annotations

import hashlib
import json

import pytest

from paddlecd.artifacts import transfer as artifacts
from paddlecd.artifacts.storage import FileStore
from paddlecd.errors import StorageError


@pytest.fixture
def store(tmp_path):
    return FileStore(tmp_path / "store")


def _files(store, version="1.4.0"):
    return sorted(p.name for p in (store.root / "ocr-det" / version).iterdir())


def _upload(store, model_dir, version="1.4.0", **kw):
    return artifacts.upload(store, artifacts.plan_upload(store, model_dir, name="ocr-det", version=version, **kw))


def test_same_rules_as_s3(store, jit_exports, tmp_path):
    _upload(store, jit_exports["tiny"])
    assert _files(store) == ["inference.json", "inference.pdiparams", "manifest.json"]
    manifest = store.root / "ocr-det" / "1.4.0" / "manifest.json"
    mtime = manifest.stat().st_mtime_ns
    assert _upload(store, jit_exports["tiny"]).bytes_to_move == 0 and manifest.stat().st_mtime_ns == mtime
    with pytest.raises(StorageError, match="already holds a different model"):
        _upload(store, jit_exports["tiny2"])
    assert manifest.stat().st_mtime_ns == mtime
    _upload(store, jit_exports["tiny2"], overwrite=True)
    new = hashlib.sha256((jit_exports["tiny2"] / "inference.pdiparams").read_bytes()).hexdigest()
    assert json.loads(manifest.read_text())["files"][1] == {"path": "inference.pdiparams", "size": 90, "sha256": new}
    artifacts.download(store, "ocr-det", "1.4.0", tmp_path / "dl")
    assert (tmp_path / "dl" / "inference.pdiparams").read_bytes() == (jit_exports["tiny2"] / "inference.pdiparams").read_bytes()


def test_interrupted_upload_then_rerun(store, jit_exports):
    plan = artifacts.plan_upload(store, jit_exports["big"], name="ocr-det", version="2.0.0")

    def fail(_n):
        raise ConnectionAbortedError("injected")

    plan.put.reverse()  # the big parameters file first: it fails half-written
    with pytest.raises(ConnectionAbortedError):
        artifacts.upload(store, plan, progress=fail)
    assert _files(store, "2.0.0") == []  # the temp file was removed, no manifest
    (store.root / "ocr-det" / "2.0.0" / ".inference.pdiparams.x.tmp").write_bytes(b"killed -9 leftover")
    plan = artifacts.plan_upload(store, jit_exports["big"], name="ocr-det", version="2.0.0")
    assert plan.stale == ["ocr-det/2.0.0/.inference.pdiparams.x.tmp"]
    artifacts.upload(store, plan)
    assert _files(store, "2.0.0") == ["inference.json", "inference.pdiparams", "manifest.json"]
    assert artifacts.list_versions(store, "ocr-det")[0]["bytes"] == sum(
        p.stat().st_size for p in jit_exports["big"].iterdir())


def test_corrupted_file_detected_on_download(store, jit_exports, tmp_path):
    _upload(store, jit_exports["tiny"])
    (store.root / "ocr-det" / "1.4.0" / "inference.json").write_text("{}")
    with pytest.raises(StorageError, match="integrity check failed for file://.*/inference.json"):
        artifacts.download(store, "ocr-det", "1.4.0", tmp_path / "dl")
    assert not (tmp_path / "dl").exists()

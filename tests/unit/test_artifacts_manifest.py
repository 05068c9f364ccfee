"""Building and validating the artifact manifest against its JSON schema."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import re
from pathlib import Path

import pytest

from paddlecd.artifacts import manifest as am
from paddlecd.errors import ConfigError, StorageError

DIGEST = "sha256:" + "b" * 64


@pytest.fixture
def export(tmp_path):
    (tmp_path / "inference.json").write_bytes(b'{"program": 1}')
    (tmp_path / "inference.pdiparams").write_bytes(bytes(range(256)) * 4)
    return am.find_export(tmp_path)


def _manifest(export, **kw):
    entries = [am.hash_file(export.folder / f) for f in export.files]
    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    return am.build_manifest(export, entries, name="ocr-det", version="1.4.0", created=when, **kw)


def test_hash_file_gives_size_and_sha256(tmp_path):
    p = tmp_path / "x.pdiparams"
    p.write_bytes(b"a" * 3_000_000)
    e = am.hash_file(p, chunk=1 << 16)
    assert (e.path, e.size, e.sha256) == (
        "x.pdiparams",
        3_000_000,
        hashlib.sha256(b"a" * 3_000_000).hexdigest(),
    )


def test_build_manifest_records_everything(export):
    doc = _manifest(
        export,
        image=am.parse_image(f"reg.example/paddle@{DIGEST}"),
        paddle_version="3.0.0",
        git_revision="0123abc",
        metrics={"hmean": 0.83},
    )
    assert doc["files"] == [
        {
            "path": "inference.json",
            "size": 14,
            "sha256": hashlib.sha256(b'{"program": 1}').hexdigest(),
        },
        {
            "path": "inference.pdiparams",
            "size": 1024,
            "sha256": hashlib.sha256(bytes(range(256)) * 4).hexdigest(),
        },
    ]
    assert doc["image"] == {"reference": f"reg.example/paddle@{DIGEST}", "digest": DIGEST}
    assert (doc["created"], doc["format"], doc["model_prefix"]) == (
        "2026-01-02T03:04:05Z",
        "paddle-pir-json",
        "inference",
    )
    assert (doc["schema_version"], doc["metrics"], doc["git_revision"]) == (
        1,
        {"hmean": 0.83},
        "0123abc",
    )


def test_manifest_bytes_are_canonical(export):
    doc = _manifest(export)
    raw = am.manifest_bytes(doc)
    assert raw.endswith(b"\n") and json.loads(raw) == doc
    assert raw == am.manifest_bytes(json.loads(raw))


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d["files"][0].update(sha256="XYZ"), "files/0/sha256"),
        (lambda d: d["files"][0].update(path="../escape"), "files/0/path"),
        (lambda d: d["files"][0].update(path=".."), "files/0/path"),  # download would climb out
        (lambda d: d["files"][0].update(path="."), "files/0/path"),
        (
            lambda d: d["files"].append({"path": "manifest.json", "size": 1, "sha256": "0" * 64}),
            "files/2/path",
        ),
        (lambda d: d.update(version="1.4"), "version"),
        (lambda d: d.update(name="OCR_det"), "name"),
        (lambda d: d.update(image={"reference": "r", "digest": "sha256:short"}), "image"),
        (lambda d: d.update(metrics={"hmean": "high"}), "metrics"),
        (lambda d: d.update(extra=1), "(top)"),
        (lambda d: d.pop("created"), "(top)"),
        (lambda d: d.update(files=d["files"][:1]), "files"),
        # trial 11: shown as 10**30 B, fetched twice, listed as "created yesterday"
        (lambda d: d["files"][0].update(size=10**30), "files/0/size"),
        (lambda d: d["files"].append(dict(d["files"][0])), "files"),
        (lambda d: d.update(created="yesterday"), "created"),
        (lambda d: d.update(created="2026-13-01"), "created"),
    ],
)
def test_schema_rejects_bad_manifests(export, change, where):
    doc = copy.deepcopy(_manifest(export))
    change(doc)
    with pytest.raises(StorageError, match=f"invalid manifest at {re.escape(where)}"):
        am.validate_manifest(doc, where="s3://b/ocr-det/1.4.0/manifest.json", error=StorageError)


def test_entries_of_round_trip(export):
    doc = _manifest(export)
    entries = am.entries_of(doc)
    assert set(entries) == {"inference.json", "inference.pdiparams"}
    assert entries["inference.json"] == am.hash_file(export.folder / "inference.json")


def test_image_reference_needs_a_digest():
    assert am.parse_image(None) is None
    with pytest.raises(ConfigError, match="image reference 'reg/paddle:3.0' has no digest"):
        am.parse_image("reg/paddle:3.0")


def test_metrics_file(tmp_path):
    good = tmp_path / "m.json"
    good.write_text('{"hmean": 0.83, "fps": 120}')
    assert am.load_metrics(good) == {"hmean": 0.83, "fps": 120}
    for bad in ('["x"]', '{"ok": true}', '{"a": "1"}', "not json"):
        good.write_text(bad)
        with pytest.raises(ConfigError, match=f"metrics file {good}"):
            am.load_metrics(good)
    # trial 18: a missing file was "not a regular file of at most 1048576 bytes"
    with pytest.raises(ConfigError) as e:
        am.load_metrics(tmp_path / "missing.json")
    assert e.value.cause == f"metrics file {tmp_path}/missing.json does not exist"
    with pytest.raises(ConfigError) as e:
        am.load_metrics(tmp_path)
    assert e.value.cause == f"metrics file {tmp_path} is a folder, not a regular file"
    (tmp_path / "dangling.json").symlink_to(tmp_path / "gone")
    with pytest.raises(ConfigError, match="is a symbolic link .*, not a regular file"):
        am.load_metrics(tmp_path / "dangling.json")
    # trial 19: Python's json text for an empty file, and {} recorded as no metrics
    for body, cause in [(b"", "empty"), (b"\xe0{}", "not UTF-8 text (byte 0)"),
                        (b'{"a": 1,}', "not JSON: expecting property name enclosed in double "
                                       "quotes at line 1, column 9"),
                        (b"{}", None)]:
        good.write_bytes(body)
        with pytest.raises(ConfigError) as e:
            am.load_metrics(good)
        assert e.value.cause == (f"metrics file {good}: {cause}" if cause
                                 else f"metrics file {good} holds no metric ({{}})")
    good.write_bytes(b" " * (am.METRICS_MAX_BYTES + 1))
    with pytest.raises(ConfigError, match=r"1048577 bytes, more than the 1048576"):
        am.load_metrics(good)


def test_git_revision_outside_a_checkout_is_none(tmp_path, project_root):
    assert am.git_revision(tmp_path) is None
    rev = am.git_revision(project_root)
    assert rev is None or len(rev) == 40


@pytest.mark.parametrize("text", ['{"acc": NaN}', '{"acc": Infinity}', '{"acc": 1e400}'])
def test_metrics_that_are_not_finite_numbers_are_refused(tmp_path, text):
    """A trial: NaN and 1e400 were stored, and the manifest was no longer JSON."""
    path = tmp_path / "m.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match="expected a JSON object of finite numbers"):
        am.load_metrics(path)


def test_metric_names_are_labels_and_the_file_a_file(tmp_path):
    """A re-trial: a 100 kB metric name was accepted and stored in the manifest."""
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"a" * 100_000: 1}))
    with pytest.raises(ConfigError, match="a metric name of 100000 characters"):
        am.load_metrics(path)
    with pytest.raises(ConfigError, match="not a regular file"):
        am.load_metrics(Path("/dev/zero"))


def test_a_bare_digest_as_the_producing_image_is_named_as_one():
    with pytest.raises(ConfigError, match="is a digest without its repository"):
        am.parse_image("sha256:" + "a" * 64)


def test_a_metric_given_twice_is_refused(tmp_path):
    """Trial 9: ``{"a": 1, "a": 2}`` stored a = 2, the first value dropped unsaid."""
    path = tmp_path / "m.json"
    path.write_text('{"a": 1, "a": 2}')
    with pytest.raises(ConfigError, match="the key 'a' is given twice"):
        am.load_metrics(path)

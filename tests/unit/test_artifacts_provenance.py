"""Truthful manifests: the InputSpec is read from the export's program, the Paddle
version is the producing image's (or given), never the uploading host's. The PIR programs in
tests/data/artifacts were written by paddle.jit.save (Paddle 3.0.0, InputSpec([None, 4])), and
legacy-linear.pdmodel by the same with FLAGS_enable_pir_api=0 (the ProgramDesc of a
paddle.nn.Linear(4, 2)), in the suite's CPU image."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from paddlecd.artifacts import program
from paddlecd.artifacts import transfer as arts
from paddlecd.artifacts.storage.file import FileStore
from paddlecd.errors import ConfigError

DATA = Path(__file__).parents[1] / "data" / "artifacts"


def _export(folder: Path, program_file: str | None = "pir-linear.json", *, legacy=False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if legacy:
        shutil.copy(DATA / "legacy-linear.pdmodel", folder / "inference.pdmodel")
    else:
        shutil.copy(DATA / program_file, folder / "inference.json")
    (folder / "inference.pdiparams").write_bytes(b"\0" * 40)
    return folder


@pytest.mark.parametrize(("data", "why"), [
    (b"garbage", "not protobuf of one"), (b"\x0a\x00", "a block lacks its idx or parent_idx"),
    (b"\x0a\x04\x08\x01\x10\x00", "its first block is not the global block (idx 0)"),
    (b"\x32\x01x", "it has no block"), (b'{"base_code": {"magic": "pir"}}', "not protobuf")])
def test_a_pdmodel_that_is_no_program_desc_is_refused_before_it_is_stored(tmp_path, data, why):
    """Trial 17: a 7-byte "garbage" model.pdmodel was planned, stored and signed (a broken
    model.json is refused), and artifacts.check then crashed on it with a segmentation fault
    inside the image. A Paddle-written ProgramDesc passes (tests/data/artifacts)."""
    folder = _export(tmp_path / "m", legacy=True)
    assert program.inputs_of(folder, "inference", "paddle-program") is None
    (folder / "inference.pdmodel").write_bytes(data)
    with pytest.raises(ConfigError) as e:
        program.inputs_of(folder, "inference", "paddle-program")
    assert e.value.cause.startswith(f"{folder / 'inference.pdmodel'} is not a Paddle program "
                                    f"(ProgramDesc): {why}")


def test_pir_inputs_are_read_from_the_program():
    (spec,) = program.pir_inputs(DATA / "pir-linear.json")
    assert spec == program.InputSpec("x", (-1, 4), "float32")
    assert spec.dynamic == (0,)
    assert program.InputSpec.from_json(spec.to_json()) == spec


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("not json", "is not a PIR program"),
        ('{"base_code": {"magic": "other"}}', "no base_code.magic 'pir'"),
        ('{"base_code": {"magic": "pir"}, "program": {"regions": []}}', "has no input"),
    ],
)
def test_not_a_pir_program(tmp_path, text, cause):
    (tmp_path / "m.json").write_text(text)
    with pytest.raises(ConfigError, match=cause):
        program.pir_inputs(tmp_path / "m.json")


def _plan(tmp_path, folder, **kw):
    store = FileStore(tmp_path / "store")
    return arts.plan_upload(store, folder, name="ocr-det", version="1.4.0", **kw)


def test_upload_does_not_record_the_hosts_paddle(tmp_path):
    """The reported bug: a 2.x-format export uploaded from a host with Paddle 3.0.0 was recorded
    as paddle_version 3.0.0. Without an image or a flag the version is unknown, and said so."""
    plan = _plan(tmp_path, _export(tmp_path / "m", legacy=True))
    doc = plan.manifest
    assert doc["format"] == "paddle-program"
    assert (doc["paddle_version"], doc["paddle_version_from"], doc["input_spec"]) == (
        None,
        None,
        None,
    )
    assert any("paddle version unknown" in line for line in plan.lines())


def test_the_producing_images_paddle_and_the_programs_inputs_are_recorded(tmp_path):
    plan = _plan(tmp_path, _export(tmp_path / "m"), image_paddle="3.0.0")
    doc = plan.manifest
    assert (doc["paddle_version"], doc["paddle_version_from"]) == ("3.0.0", "image")
    assert doc["input_spec"] == [{"name": "x", "shape": [-1, 4], "dtype": "float32"}]
    assert "  paddle 3.0.0 (from the image)" in plan.lines()


def test_a_given_version_wins_over_the_image(tmp_path):
    doc = _plan(
        tmp_path, _export(tmp_path / "m"), image_paddle="3.0.0", paddle_version="2.6.1"
    ).manifest
    assert (doc["paddle_version"], doc["paddle_version_from"]) == ("2.6.1", "flag")


def test_reference_files_travel_with_the_export(tmp_path):
    folder = _export(tmp_path / "m")
    for name in ("reference_inputs.npz", "reference_outputs.npz", "notes.txt"):
        (folder / name).write_bytes(b"x")
    doc = _plan(tmp_path, folder).manifest
    assert [f["path"] for f in doc["files"]] == [
        "inference.json",
        "inference.pdiparams",
        "reference_inputs.npz",
        "reference_outputs.npz",
    ]


def test_check_names_an_unknown_release_as_release_show_does(monkeypatch, tmp_path):
    """--image 9.9.9-cpu that the release repository lacks: one line naming the release and the
    repository, exit class 2 (ConfigError), not the registry's raw 404. (The registry's answer is
    faked: the real lookup is registry.pin, tested against distribution elsewhere.)"""
    from paddlecd import config
    from paddlecd.artifacts import check as model_check
    from paddlecd.errors import NotFoundError
    from paddlecd.registry import client as registry

    def missing(settings, ref):
        raise NotFoundError(f"{ref}: not found (HTTP 404)", "")

    monkeypatch.setattr(registry, "pin", missing)
    s = config.load({"state_dir": str(tmp_path)}, root=Path(__file__).resolve().parents[2])
    with pytest.raises(ConfigError) as e:
        model_check.resolve_image(s, "9.9.9-cpu")
    assert e.value.cause == f"unknown release 9.9.9-cpu in {s.release_repo}"
    assert "release.list" in e.value.hint
    # trial 21: a bare digest was asked of the release repository as the tag "sha256:…"
    with pytest.raises(ConfigError, match="is a digest without its repository"):
        model_check.resolve_image(s, "sha256:" + "9" * 64)


def test_a_given_version_against_the_images_label_is_said(monkeypatch, tmp_path):
    """A re-trial: ``upload --image <3.0.0 image> --paddle-version 2.6.0`` recorded 2.6.0 and
    said nothing of the label it overrode (the image was not even read)."""
    from paddlecd import config
    from paddlecd.artifacts import model_upload, runtime
    from paddlecd.signing import keys

    monkeypatch.setattr(runtime, "paddle_version", lambda settings, ref: "3.0.0")
    private, _ = keys.keygen(tmp_path / "keys")
    s = config.load({"state_dir": str(tmp_path), "verify.signing_key": str(private)},
                    root=Path(__file__).resolve().parents[2])
    image = "127.0.0.1:5000/p/q@sha256:" + "a" * 64
    planned = model_upload.plan_model_upload(
        s, _export(tmp_path / "m"), name="ocr-det", version="1.4.0",
        to=f"file://{tmp_path / 'store'}", image=image, paddle_version="2.6.0")
    assert planned.plan.manifest["paddle_version"] == "2.6.0"
    assert any("--paddle-version 2.6.0 differs from" in line and "label 3.0.0" in line
               for line in planned.lines()), planned.lines()


def test_a_re_upload_of_the_same_files_with_other_provenance_is_refused_not_unchanged(tmp_path):
    """A third trial: a stored model (paddle unknown) uploaded again with ``--paddle-version
    3.0.0`` said "unchanged, 0 bytes moved" and dropped the flag. Same files with another given
    Paddle version, image or metrics are refused unless --overwrite, which records them."""
    from paddlecd.errors import StorageError

    folder = _export(tmp_path / "m")
    store = FileStore(tmp_path / "store")
    arts.upload(store, _plan(tmp_path, folder))
    assert _plan(tmp_path, folder).action == "unchanged"  # nothing given: nothing to compare
    with pytest.raises(StorageError) as e:
        _plan(tmp_path, folder, paddle_version="3.0.0")
    assert e.value.cause.endswith("already holds this model with other provenance "
                                  "(paddle_version not recorded (given '3.0.0'))")
    assert "--overwrite" in e.value.hint
    (tmp_path / "metrics.json").write_text('{"acc": 0.5}')
    with pytest.raises(StorageError, match=r'\(metrics not recorded \(given \{"acc": 0\.5\}\)\)'):
        _plan(tmp_path, folder, metrics=tmp_path / "metrics.json")  # as JSON, not a dict's repr
    plan = _plan(tmp_path, folder, paddle_version="3.0.0", overwrite=True)
    assert plan.action == "overwrite" and plan.put == []
    arts.upload(store, plan)
    assert _plan(tmp_path, folder, paddle_version="3.0.0").action == "unchanged"
    assert arts.download(store, "ocr-det", "1.4.0", tmp_path / "dl")["paddle_version"] == "3.0.0"


def test_a_full_disk_names_the_download_folder_and_the_store_claim(tmp_path, monkeypatch):
    """A third trial on a full tmpfs: download said "reading <store>/model.json: No space left on
    device" (the store was fine; --dest was full) and upload's claim said "no space left on the
    device" naming nothing (os.write's OSError has no file name)."""
    import errno
    import os

    from paddlecd.errors import StorageError

    folder = _export(tmp_path / "m")
    store = FileStore(tmp_path / "store")
    arts.upload(store, _plan(tmp_path, folder))

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(shutil, "copyfileobj", full)
        with pytest.raises(StorageError) as e:
            arts.download(store, "ocr-det", "1.4.0", tmp_path / "dl")
    assert e.value.cause == f"downloading into {tmp_path / 'dl'}: no space left on the device"
    assert f"df -h {tmp_path}" in e.value.hint
    assert not (tmp_path / "dl").exists() and not list(tmp_path.glob(".dl.*"))
    monkeypatch.setattr(os, "write", full)
    with pytest.raises(StorageError) as e:
        arts.upload(store, _plan(tmp_path, folder, paddle_version="3.0.0", overwrite=True))
    assert e.value.cause.startswith(f"claiming {store.url}/ocr-det/1.4.0/: no space left on "
                                    f"the device ({tmp_path / 'store' / '.claims'}")


@pytest.mark.parametrize("error, fatal", [("RegistryAuthError", True), ("NotFoundError", True),
                                          ("ConfigError", True), ("RegistryError", False)])
def test_an_image_the_registry_refuses_fails_the_upload_one_it_cannot_reach_is_noted(
        monkeypatch, error, fatal):
    """Trial 9: ``upload --image`` with rejected credentials went on, exit 0, and recorded
    ``paddle_version: null``; every other task refuses them (exit 5). A registry that does not
    answer is still a note (the upload records null and says why)."""
    from paddlecd import errors
    from paddlecd.artifacts import runtime

    def refuse(settings, reference):
        raise getattr(errors, error)("registry said no", "log in")

    monkeypatch.setattr(runtime, "image_labels", refuse)
    ref = "reg.example/p@sha256:" + "a" * 64
    if fatal:
        with pytest.raises(getattr(errors, error)):
            runtime.declared_paddle(None, ref)
    else:
        assert runtime.declared_paddle(None, ref) == (None, f"{ref} not readable: "
                                                             "registry said no")


@pytest.mark.parametrize("broken", ["half", "file", "nocolon"])
def test_upload_image_with_broken_credentials_is_refused_as_every_task_refuses_them(
        tmp_path, monkeypatch, settings, broken):
    """Trial 11: ``upload --image`` went on, exit 0, recording ``paddle_version: null``, with
    only PADDLECD_REGISTRY_USERNAME set, DOCKER_CONFIG naming a file, or an ``auths`` entry
    without a colon; push, promote and release.list refuse each (exit 2)."""
    import base64
    import json

    from paddlecd.artifacts import runtime
    from paddlecd.errors import ConfigError

    monkeypatch.delenv("PADDLECD_REGISTRY_USERNAME", raising=False)
    monkeypatch.delenv("PADDLECD_REGISTRY_PASSWORD", raising=False)
    host = settings.registry.url  # the configured registry: the env pair is for it
    config = tmp_path / "docker"
    config.mkdir()
    (config / "config.json").write_text("{}")
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    if broken == "half":
        monkeypatch.setenv("PADDLECD_REGISTRY_USERNAME", "tester")
    elif broken == "file":
        monkeypatch.setenv("DOCKER_CONFIG", str(config / "config.json"))
    else:
        (config / "config.json").write_text(json.dumps(
            {"auths": {host: {"auth": base64.b64encode(b"tester").decode()}}}))
    with pytest.raises(ConfigError):
        runtime.declared_paddle(settings, f"{host}/p@sha256:" + "a" * 64)


def test_a_store_that_takes_the_manifest_and_keeps_none_fails_the_upload(tmp_path):
    """Trial 13: an S3 store answered 200 to the manifest PUT and stored nothing; upload said
    "uploaded" and the version was invisible ("no model at …"). The manifest is read back.
    A file store that drops that one write stands in for the proxy here."""
    from paddlecd.errors import StorageError

    class Forgetful(FileStore):
        def put_bytes(self, data, key, *, exclusive=False):
            if not key.endswith("manifest.json"):
                super().put_bytes(data, key, exclusive=exclusive)

    with pytest.raises(StorageError, match="took the manifest but does not serve it"):
        arts.upload(Forgetful(tmp_path / "store"), _plan(tmp_path, _export(tmp_path / "m")))


@pytest.mark.xdist_group("paddle")  # one worker imports paddle (~2.5 s of CPU), not both
def test_the_program_desc_outline_agrees_with_paddle_s_own_reader(tmp_path):
    """The outline paddlecd reads a .pdmodel with (no Paddle on the uploading host) is checked
    against Paddle's own compiled framework.proto (paddle.base.proto.framework_pb2, of the
    paddlepaddle wheel the tests install): each input is a program for both or for neither."""
    from google.protobuf.message import DecodeError
    from paddle.base.proto import framework_pb2

    real = (DATA / "legacy-linear.pdmodel").read_bytes()
    cases = [real, real[:-1], real[: len(real) // 2], b"garbage", b"\x0a\x00",
             b"\x0a\x04\x08\x00\x10\x7f", b"\x0a\x02\x08\x00", real + b"\x0a\x00"]
    for i, data in enumerate(cases):
        path = tmp_path / f"{i}.pdmodel"
        path.write_bytes(data)
        theirs = framework_pb2.ProgramDesc()
        try:
            theirs.ParseFromString(data)
            paddle_reads = theirs.IsInitialized() and len(theirs.blocks) > 0
        except DecodeError:
            paddle_reads = False
        try:
            program.check_program_desc(path)
            ours = True
        except ConfigError:
            ours = False
        assert ours == paddle_reads, (i, data[:20], ours, paddle_reads)
    assert program.check_program_desc(tmp_path / "0.pdmodel") is None  # the real one passes

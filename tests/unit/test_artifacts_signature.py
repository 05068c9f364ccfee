"""Signed models (OpenSSF Model Signing) on a file:// store: upload writes ``model.sig`` before
``manifest.json``; download and show verify it against the trusted keys and refuse a failing model
by name. Independent readers: the ``model_signing verify key`` CLI, sigstore-js
(``@sigstore/verify``, tests/support/sigstore_verify.cjs) and Sigstore's bundle model
(sigstore-models). No services: the store is a folder."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from sigstore_models.bundle.v1 import Bundle

from paddlecd import config
from paddlecd.artifacts import manifest as am
from paddlecd.artifacts import show as shown
from paddlecd.artifacts import signature as sig
from paddlecd.artifacts import transfer as arts
from paddlecd.artifacts.storage.file import FileStore
from paddlecd.errors import ModelSignatureError
from paddlecd.signing import keys

from support import model_signing_cli, sigstore_js

DATA = Path(__file__).parents[1] / "data" / "artifacts"


class Recording(FileStore):
    """A file store that records the order of the keys written."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.written: list[str] = []

    def put_file(self, path, key, **kw):
        self.written.append(key)
        return super().put_file(path, key, **kw)

    def put_bytes(self, data, key, **kw):
        self.written.append(key)
        return super().put_bytes(data, key, **kw)


@pytest.fixture
def signing(tmp_path):
    """A key pair and settings that sign with it and trust it."""
    private, public = keys.keygen(tmp_path / "keys")
    settings = config.load({"verify.signing_key": str(private),
                            "release.trusted_keys": str(public), "state_dir": str(tmp_path / "s")},
                           root=tmp_path, environ={})
    return settings, public


def _export(folder: Path, params: bytes = b"\0" * 40) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / "pir-linear.json", folder / "inference.json")
    (folder / "inference.pdiparams").write_bytes(params)
    (folder / "notes.txt").write_text("not part of the export")  # never signed nor named
    return folder


def _upload(store, folder: Path, settings, version="1.4.0", **kw) -> arts.UploadPlan:
    plan = arts.plan_upload(store, folder, name="ocr-det", version=version,
                            signer=sig.signer_for(settings), **kw)
    return arts.upload(store, plan)


def _version_dir(tmp_path: Path, version="1.4.0") -> Path:
    return tmp_path / "store" / "ocr-det" / version


def test_upload_signs_before_the_manifest_and_model_signing_cli_accepts_it(tmp_path, signing):
    settings, public = signing
    store = Recording(tmp_path / "store")
    plan = _upload(store, _export(tmp_path / "m"), settings)
    assert (f"  put    model.sig  (OpenSSF Model Signing, key {keys.key_id(public)} from "
            in "\n".join(plan.lines()))
    assert store.written[-2:] == ["ocr-det/1.4.0/model.sig", "ocr-det/1.4.0/manifest.json"]
    assert "  skip   notes.txt  (in the folder, not part of the jit.save export: not stored)" \
        in plan.lines()
    folder = _version_dir(tmp_path)
    done = model_signing_cli.verify(folder, public)
    assert done.returncode == 0 and "Verification succeeded" in done.stdout, done.stderr
    # the manifest's sha256 values are the signed ones, and they are the files' own
    doc = json.loads((folder / am.MANIFEST).read_text())
    statement = json.loads(base64.b64decode(
        json.loads((folder / sig.SIGNATURE).read_bytes())["dsseEnvelope"]["payload"]))
    signed = {r["name"]: r["digest"] for r in statement["predicate"]["resources"]}
    assert signed == {f["path"]: am.hash_file(folder / f["path"]).sha256 for f in doc["files"]}
    assert "notes.txt" not in json.dumps(statement)  # nothing outside the export is named
    assert statement["subject"][0]["name"] == "ocr-det"
    # a file changed after signing: the CLI refuses the folder too
    (folder / "inference.pdiparams").write_bytes(b"\1" * 40)
    bad = model_signing_cli.verify(folder, public)
    assert bad.returncode != 0 and "Verification failed" in bad.stderr


def test_sigstore_js_and_sigstore_models_read_the_signature(tmp_path, signing):
    settings, public = signing
    store = FileStore(tmp_path / "store")
    _upload(store, _export(tmp_path / "m"), settings)
    raw = (_version_dir(tmp_path) / sig.SIGNATURE).read_bytes()
    parsed = Bundle.from_json(raw)
    assert parsed.media_type == sig.BUNDLE_TYPE and parsed.dsse_envelope is not None
    # the subject digest model-signing defines: sha256 over the files' digests in name order,
    # computed here from paddlecd's manifest alone
    doc = json.loads((_version_dir(tmp_path) / am.MANIFEST).read_text())
    root = hashlib.sha256(b"".join(bytes.fromhex(f["sha256"])
                                   for f in sorted(doc["files"], key=lambda f: f["path"])))
    hint = sig.ModelSigner(Path(settings.verify.signing_key).read_bytes(), "k").hint
    answer = sigstore_js.verify(raw, hint=hint, public_key=public, digest=root.hexdigest(),
                                predicate_type=sig.PREDICATE_TYPE, tmp=tmp_path)
    assert answer["ok"], answer
    changed = json.loads(raw)
    payload = base64.b64decode(changed["dsseEnvelope"]["payload"]).replace(b"ocr-det", b"ocr-dex")
    changed["dsseEnvelope"]["payload"] = base64.b64encode(payload).decode()
    tampered = sigstore_js.verify(json.dumps(changed).encode(), hint=hint, public_key=public,
                                  digest=root.hexdigest(), predicate_type=sig.PREDICATE_TYPE,
                                  tmp=tmp_path)
    assert not tampered["ok"] and "SIGNATURE_ERROR" in tampered["error"]


def test_download_and_show_verify_the_signature(tmp_path, signing):
    settings, public = signing
    store = FileStore(tmp_path / "store")
    _upload(store, _export(tmp_path / "m"), settings)
    trusted = keys.trusted(settings)
    arts.download(store, "ocr-det", "1.4.0", tmp_path / "dl", trusted=trusted)
    assert (tmp_path / "dl" / sig.SIGNATURE).is_file()
    assert model_signing_cli.verify(tmp_path / "dl", public).returncode == 0
    record = shown.show(store, "ocr-det", "1.4.0", trusted=trusted)
    assert record.signature["keyid"] == trusted[0].keyid
    assert record.to_json()["signature"]["predicateType"] == sig.PREDICATE_TYPE
    assert (f"signature   model.sig verified: key {keys.key_id(public)} trusted via"
            in "\n".join(record.lines()))  # the whole id, as keygen prints it
    # a trial: "verified" above a stored file edited by hand read as if its bytes were checked
    assert "the stored bytes are hashed by artifacts.download" in "\n".join(record.lines())


def _refused(store, trusted, dest: Path, match: str) -> None:
    with pytest.raises(ModelSignatureError, match=match) as e:
        arts.download(store, "ocr-det", "1.4.0", dest, trusted=trusted)
    assert e.value.exit_code == 6 and e.value.hint
    assert not dest.exists() and not list(dest.parent.glob(f".{dest.name}.*"))  # nothing written
    with pytest.raises(ModelSignatureError, match=match):
        shown.show(store, "ocr-det", "1.4.0", trusted=trusted)


def test_a_file_changed_after_signing_is_refused_by_name(tmp_path, signing):
    settings, _ = signing
    store = FileStore(tmp_path / "store")
    _upload(store, _export(tmp_path / "m"), settings)
    folder = _version_dir(tmp_path)
    # the file and its manifest entry both changed: the sha256 checks pass, the signature not
    (folder / "inference.pdiparams").write_bytes(b"\1" * 40)
    doc = json.loads((folder / am.MANIFEST).read_text())
    doc["files"] = [{**f, "sha256": am.hash_file(folder / f["path"]).sha256} for f in doc["files"]]
    (folder / am.MANIFEST).write_bytes(am.manifest_bytes(doc))
    _refused(store, keys.trusted(settings), tmp_path / "dl",
             r"ocr-det/1.4.0/model.sig does not sign the files manifest.json lists: "
             r"inference.pdiparams differ")


def test_a_stored_file_whose_bytes_changed_is_a_verification_failure_exit_6(tmp_path, signing):
    """Trial 5: a stored file changed after signing (its manifest entry not) exited 8, the storage
    code, though the store answered fine; the refusal table says 6, as for a bad model.sig."""
    settings, _ = signing
    store = FileStore(tmp_path / "store")
    _upload(store, _export(tmp_path / "m"), settings)
    (_version_dir(tmp_path) / "inference.pdiparams").write_bytes(b"\1" * 40)
    with pytest.raises(ModelSignatureError, match="integrity check failed for file://") as e:
        arts.download(store, "ocr-det", "1.4.0", tmp_path / "dl", trusted=keys.trusted(settings))
    assert e.value.exit_code == 6 and not (tmp_path / "dl").exists()


@pytest.mark.parametrize("content, match", [(None, r"model.sig is missing: the model is not "
                                                   r"signed"), (b"", r"model.sig is empty")])
def test_a_missing_or_empty_signature_is_refused(tmp_path, signing, content, match):
    settings, _ = signing
    store = FileStore(tmp_path / "store")
    _upload(store, _export(tmp_path / "m"), settings)
    path = _version_dir(tmp_path) / sig.SIGNATURE
    path.unlink() if content is None else path.write_bytes(content)
    _refused(store, keys.trusted(settings), tmp_path / "dl", match)


def test_a_signature_by_an_untrusted_key_or_a_changed_one_is_refused(tmp_path, signing):
    settings, _ = signing
    store = FileStore(tmp_path / "store")
    _upload(store, _export(tmp_path / "m"), settings)
    _, other = keys.keygen(tmp_path / "other")
    stranger = [keys.TrustedKey(keys.named(keys._public(other)), str(other))]
    _refused(store, stranger, tmp_path / "dl", r"is signed by a key that is not in "
                                               r"release.trusted_keys \(its publicKey hint, "
                                               r"model-signing's hex sha256 of the key's PEM: "
                                               r"[0-9a-f]{64}\)")
    path = _version_dir(tmp_path) / sig.SIGNATURE
    doc = json.loads(path.read_bytes())
    doc["dsseEnvelope"]["signatures"][0]["sig"] = base64.b64encode(b"\0" * 70).decode()
    path.write_text(json.dumps(doc))
    _refused(store, keys.trusted(settings), tmp_path / "dl", r"does not verify with .*it was "
                                                             r"changed")


def test_a_separate_artifacts_signing_key_signs(tmp_path, signing):
    settings, public = signing
    own, own_public = keys.keygen(tmp_path / "model-keys")
    both = config.load({"verify.signing_key": settings.verify.signing_key,
                        "artifacts.signing_key": str(own),
                        "release.trusted_keys": f"{public},{own_public}"},
                       root=tmp_path, environ={})
    store = FileStore(tmp_path / "store")
    _upload(store, _export(tmp_path / "m"), both)
    assert model_signing_cli.verify(_version_dir(tmp_path), own_public).returncode == 0
    record = shown.show(store, "ocr-det", "1.4.0", trusted=keys.trusted(both))
    assert record.signature["key_source"] == str(own_public)


def test_an_unsigned_version_is_signed_by_the_next_upload_moving_no_file(tmp_path, signing):
    settings, public = signing
    store, folder = Recording(tmp_path / "store"), _export(tmp_path / "m")
    arts.upload(store, arts.plan_upload(store, folder, name="ocr-det", version="1.4.0"))
    assert not (_version_dir(tmp_path) / sig.SIGNATURE).exists()
    store.written.clear()
    plan = _upload(store, folder, settings)
    assert plan.action == "sign" and plan.bytes_to_move == 0
    assert store.written == ["ocr-det/1.4.0/model.sig", "ocr-det/1.4.0/manifest.json"]
    assert shown.show(store, "ocr-det", "1.4.0", trusted=keys.trusted(settings)).signature
    again = _upload(store, folder, settings)
    assert again.action == "unchanged"


@pytest.mark.parametrize("damage", [b"", b"garbage", None])  # None: another key's signature
def test_a_damaged_signature_is_signed_again_by_the_next_upload(tmp_path, signing, damage):
    """A trial (issue 21): an empty or garbage model.sig was refused by show and download with
    the hint "re-upload the model", and the re-upload planned "unchanged" and kept it."""
    settings, _ = signing
    store, folder = Recording(tmp_path / "store"), _export(tmp_path / "m")
    _upload(store, folder, settings)
    stored = _version_dir(tmp_path) / sig.SIGNATURE
    if damage is None:
        other, _ = keys.keygen(tmp_path / "other")
        foreign = config.load({"verify.signing_key": str(other),
                               "state_dir": str(tmp_path / "s2")}, root=tmp_path, environ={})
        _upload(FileStore(tmp_path / "other-store"), folder, foreign)
        damage = (tmp_path / "other-store/ocr-det/1.4.0" / sig.SIGNATURE).read_bytes()
    stored.write_bytes(damage)
    store.written.clear()
    plan = _upload(store, folder, settings)
    assert plan.action == "sign" and plan.bytes_to_move == 0
    assert store.written == ["ocr-det/1.4.0/model.sig", "ocr-det/1.4.0/manifest.json"]
    assert shown.show(store, "ocr-det", "1.4.0", trusted=keys.trusted(settings)).signature
    assert _upload(store, folder, settings).action == "unchanged"


def test_verify_folder_checks_the_bytes_with_model_signing(tmp_path, signing):
    """The manifest and the signature agree, the bytes do not: model-signing's verifier says so."""
    settings, _ = signing
    store = FileStore(tmp_path / "store")
    _upload(store, _export(tmp_path / "m"), settings)
    folder, trusted = _version_dir(tmp_path), keys.trusted(settings)
    doc = json.loads((folder / am.MANIFEST).read_text())
    assert sig.verify_folder(folder, doc, trusted, where="v").keyid == trusted[0].keyid
    (folder / "inference.pdiparams").write_bytes(b"\2" * 40)
    with pytest.raises(ModelSignatureError, match=r"^v: the model's files are not the signed "):
        sig.verify_folder(folder, doc, trusted, where="v")


def test_a_version_copied_to_another_folder_is_refused_by_show_and_download(tmp_path, signing):
    """A trial (issue 21): ``cp -r tiny/1.0.0 tiny/9.0.0`` was shown and downloaded as 9.0.0,
    "signature verified": the signature covers the files, not the folder they sit in."""
    settings, _ = signing
    store = FileStore(tmp_path / "store")
    _upload(store, _export(tmp_path / "m"), settings)
    shutil.copytree(_version_dir(tmp_path), _version_dir(tmp_path, "9.0.0"))
    trusted = keys.trusted(settings)
    for call in (lambda: shown.show(store, "ocr-det", "9.0.0", trusted=trusted),
                 lambda: arts.download(store, "ocr-det", "9.0.0", tmp_path / "d", trusted=trusted)):
        with pytest.raises(arts.InvalidManifestError, match="is the manifest of ocr-det 1.4.0"):
            call()
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("edit", ["same size", "other size"])
def test_a_stored_file_changed_by_hand_is_put_again_by_the_next_upload(tmp_path, signing, edit):
    """A trial (issue 21): a stored model file edited in the store was "unchanged" on re-upload
    (the manifests alone were compared). The stored bytes are hashed: the file is put again,
    signed again, and the stale check record goes."""
    settings, public = signing
    store, folder = Recording(tmp_path / "store"), _export(tmp_path / "m")
    _upload(store, folder, settings)
    stored = _version_dir(tmp_path) / "inference.pdiparams"
    stored.write_bytes(b"\1" * (40 if edit == "same size" else 41))
    (_version_dir(tmp_path) / am.CHECK_JSON).write_text("{}")
    store.written.clear()
    plan = _upload(store, folder, settings)
    assert plan.action == "repair" and [e.path for e in plan.put] == ["inference.pdiparams"]
    assert "changed in the store" in "\n".join(plan.lines())
    assert store.written == ["ocr-det/1.4.0/inference.pdiparams", "ocr-det/1.4.0/model.sig",
                             "ocr-det/1.4.0/manifest.json"]
    assert stored.read_bytes() == b"\0" * 40
    assert not (_version_dir(tmp_path) / am.CHECK_JSON).exists()
    assert model_signing_cli.verify(_version_dir(tmp_path), public).returncode == 0
    assert _upload(store, folder, settings).action == "unchanged"


@pytest.mark.parametrize("field, value", [("metrics", {"acc": 0.99}), ("paddle_version", "3.1.0"),
                                          ("image", None)])
def test_a_manifest_changed_after_signing_is_refused_and_signed_again(tmp_path, signing, field,
                                                                       value):
    """A trial (issue 21): model.sig covered the files only, so a manifest whose image, metrics
    or Paddle version was edited in the store still verified. Its other fields are signed too
    (one predicate field model-signing's verifier ignores: its CLI still accepts the folder);
    the next identical upload signs the stored version again."""
    settings, public = signing
    store, folder = FileStore(tmp_path / "store"), _export(tmp_path / "m")
    _upload(store, folder, settings, metrics=_metrics(tmp_path), paddle_version="3.0.0",
            image="registry.test/app@sha256:" + "a" * 64)
    stored = _version_dir(tmp_path) / am.MANIFEST
    doc = json.loads(stored.read_text())
    assert model_signing_cli.verify(_version_dir(tmp_path), public).returncode == 0
    stored.write_bytes(am.manifest_bytes({**doc, field: value}))
    _refused(store, keys.trusted(settings), tmp_path / "dl",
             rf"ocr-det/1.4.0/model.sig does not sign what manifest.json says: {field} differ")
    plan = _upload(store, folder, settings, metrics=_metrics(tmp_path), paddle_version="3.0.0",
                   image="registry.test/app@sha256:" + "a" * 64)
    assert plan.action == "sign" and plan.bytes_to_move == 0
    assert shown.show(store, "ocr-det", "1.4.0", trusted=keys.trusted(settings)).signature
    assert json.loads(stored.read_text())[field] == doc[field]


def _metrics(tmp_path: Path) -> Path:
    path = tmp_path / "metrics.json"
    path.write_text('{"acc": 0.91, "steps": 300}')
    return path


def test_a_signature_of_the_files_alone_is_refused_with_the_upload_as_hint(tmp_path, signing):
    """A model.sig made by model-signing's own signer (no manifest field): refused, and the
    same upload signs it again."""
    import model_signing

    settings, _ = signing
    store, folder = FileStore(tmp_path / "store"), _export(tmp_path / "m")
    _upload(store, folder, settings)
    version = _version_dir(tmp_path)
    hashing = model_signing.hashing.Config().set_ignored_paths(paths=list(sig.IGNORED))
    (model_signing.signing.Config().use_elliptic_key_signer(private_key=settings.path(
        settings.verify.signing_key)).set_hashing_config(hashing)
     .sign(version, version / sig.SIGNATURE))
    _refused(store, keys.trusted(settings), tmp_path / "dl",
             r"model.sig signs the files but not the rest of manifest.json")
    assert _upload(store, folder, settings).action == "sign"

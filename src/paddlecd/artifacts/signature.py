"""Model signatures: an export signed with OpenSSF Model Signing, ``model.sig`` beside its files.

The library is PyPI ``model-signing`` 1.1.1 (sigstore/model-transparency v1.1.1), its key-based
elliptic-curve signer and verifier (``model_signing.signing.Config().use_elliptic_key_signer``,
``model_signing.verifying.Config().use_elliptic_key_verifier``). ``model.sig`` is a Sigstore
bundle v0.3: ``verificationMaterial.publicKey.hint`` = hex sha256 of the key's PEM
SubjectPublicKeyInfo, a DSSE envelope (one signature, keyid ``""``) of an in-toto Statement of
type :data:`PREDICATE_TYPE` whose predicate lists every file with its sha256 (``resources``) and
how the folder was hashed (``serialization``: files, sha256, the ignored paths;
``_signing/sign_ec_key.py`` and ``_signing/signing.py`` ``Payload`` at that tag).

What is signed: exactly the files the version's ``manifest.json`` lists, under their names,
hashed through a temporary folder of links to them (so nothing else of the export folder is read
or named), and the manifest's other fields in one more predicate field (:func:`sign`).
``manifest.json``, ``model.sig`` and the check records are ignored paths, recorded in the
signature, so ``model_signing verify key <version folder> --signature model.sig
--public_key KEY`` accepts a stored or downloaded version as it lies. One hashing pass serves
both: the manifest's sha256 values are read from the signed payload.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from securesystemslib import exceptions as sslib_errors
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

from paddlecd.artifacts import manifest as am
from paddlecd.errors import ModelSignatureError
from paddlecd.files import json_problem
from paddlecd.signing.bundle import BUNDLE_TYPE
from paddlecd.signing.keys import TrustedKey

SIGNATURE = "model.sig"
PREDICATE_TYPE = "https://model_signing/signature/v1.0"
IGNORED = (am.MANIFEST, SIGNATURE, *am.CHECK_FILES)
METADATA = "paddlecd_manifest"  # the predicate field holding :func:`metadata` of the manifest
_RESIGN = "re-upload the model with --overwrite (it is signed again), or restore the file"


@dataclass(frozen=True)
class ModelSigner:
    """The private key that signs models: its PEM bytes and where it came from (``source``: a
    file or an environment variable; never printed with the key)."""

    pem: bytes
    source: str

    @property
    def keyid(self) -> str:
        """The key's id as every message shows it (:func:`paddlecd.signing.keys.fingerprint`)."""
        from paddlecd.signing import keys

        return keys.fingerprint(serialization.load_pem_private_key(self.pem, None).public_key())

    @property
    def hint(self) -> str:
        """The hint model-signing writes: hex sha256 of the public key's PEM SPKI."""
        private = serialization.load_pem_private_key(self.pem, password=None)
        return key_hint(private.public_key())

    def holds(self, data: bytes | None, doc: Mapping[str, Any]) -> bool:
        """Whether ``data`` (a stored ``model.sig``) is this key's valid signature of the files
        the manifest ``doc`` lists (:func:`check` with this key's public half as the only
        trusted key): what a re-upload of an unchanged model keeps; else it signs again."""
        from securesystemslib.signer import SSlibKey

        from paddlecd.signing import keys

        public = serialization.load_pem_private_key(self.pem, password=None).public_key()
        own = keys.TrustedKey(keys.named(public), self.source, SSlibKey.from_crypto(public))
        try:
            check(data, doc, [own], where="model.sig")
        except ModelSignatureError:
            return False
        return True


@dataclass(frozen=True)
class Signed:
    """A signature made by :func:`sign`: the ``model.sig`` bytes and each file's entry (size in
    bytes, sha256 as signed)."""

    data: bytes
    entries: tuple[am.FileEntry, ...]


@dataclass(frozen=True)
class Checked:
    """A signature that verified: the trusted key's ``keyid`` and ``source`` file, the ``hint``."""

    hint: str
    keyid: str
    source: str

    def to_json(self) -> dict[str, str]:
        """``{"file", "hint", "keyid", "key_source", "predicateType"}``."""
        return {"file": SIGNATURE, "hint": self.hint, "keyid": self.keyid,
                "key_source": self.source, "predicateType": PREDICATE_TYPE}


def key_hint(public: Any) -> str:
    """hex sha256 of ``public``'s PEM SubjectPublicKeyInfo (model-signing's key hint)."""
    pem = public.public_bytes(serialization.Encoding.PEM,
                              serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(pem).hexdigest()


def metadata(doc: Mapping[str, Any]) -> str:
    """What ``model.sig`` signs of the manifest ``doc`` besides its files: every other field
    (name, version, image, Paddle version, metrics, input spec, ONNX record, ...) as canonical
    JSON (sorted keys, no spaces): a string, so the Statement's protobuf ``Struct`` (numbers
    as doubles) cannot alter a value."""
    rest = {k: v for k, v in doc.items() if k != "files"}
    return json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sign(signer: ModelSigner, folder: Path, files: Sequence[str], *, name: str,
         manifest: Mapping[str, Any]) -> Signed:
    """Sign ``files`` (names in ``folder``) and ``manifest``'s other fields with model-signing;
    ``name`` is the Statement's subject.

    The payload is model-signing's own (``Payload`` of the folder's hashing manifest, signed by
    its elliptic-key ``Signer``, as ``signing.Config.sign`` does at v1.1.1) plus one predicate
    field, :data:`METADATA`: :func:`metadata` of ``manifest``. Its ``Payload`` docstring: "Any
    other field should be ignored by verifiers adhering to v1.0", so ``model_signing verify``
    still accepts the signature; :func:`check` reads the field.

    Raises:
        ModelSignatureError: model-signing refused (a file vanished or is unreadable), naming it.
    """
    import model_signing
    from model_signing._signing import sign_ec_key
    from model_signing._signing import signing as ms_signing

    with tempfile.TemporaryDirectory(prefix="paddlecd-sign-") as tmp:
        view = Path(tmp) / name
        view.mkdir()
        for f in files:  # links: model-signing reads the export's bytes, names only these files
            (view / f).symlink_to((folder / f).resolve())
        key = Path(tmp) / "signing.key"
        key.touch(mode=0o600)
        key.write_bytes(signer.pem)
        out = Path(tmp) / SIGNATURE
        hashing = (model_signing.hashing.Config()
                   .set_ignored_paths(paths=list(IGNORED)).set_allow_symlinks(True))
        try:
            payload = ms_signing.Payload(hashing.hash(view))
            payload.statement.pb.predicate.update({METADATA: metadata(manifest)})
            sign_ec_key.Signer(key).sign(payload).write(out)
        except (OSError, ValueError) as e:
            raise ModelSignatureError(f"signing {folder} failed: {e}",
                                      "check that the export's files are readable") from e
        data = out.read_bytes()
        sizes = {f: (view / f).stat().st_size for f in files}
    digests = _resources(_statement(data, where=f"the signature of {folder}"))
    return Signed(data, tuple(am.FileEntry(f, sizes[f], digests[f]) for f in files))


def _statement(data: bytes, *, where: str) -> dict[str, Any]:
    """The decoded in-toto Statement of a ``model.sig`` (unverified)."""
    try:
        doc = json.loads(data)
        statement = json.loads(base64.b64decode(doc["dsseEnvelope"]["payload"]))
        if not isinstance(statement, dict):
            raise ValueError("the payload is no JSON object")
    except (ValueError, KeyError, TypeError) as e:
        why = (json_problem(e) if isinstance(e, ValueError)
               else f"no {e}" if isinstance(e, KeyError) else str(e)[:200])
        raise ModelSignatureError(f"{where} is no model-signing bundle ({why})", _RESIGN) from e
    return statement


def _resources(statement: Mapping[str, Any]) -> dict[str, str]:
    """``{file name: sha256 hex}`` of a signed Statement's ``predicate.resources``."""
    return {str(r.get("name")): str(r.get("digest"))
            for r in (statement.get("predicate") or {}).get("resources") or []
            if r.get("algorithm") == "sha256"}


def check(data: bytes | None, doc: Mapping[str, Any], trusted: Sequence[TrustedKey], *,
          where: str) -> Checked:
    """Check a stored ``model.sig`` against the version's manifest ``doc``, without its files:
    one bundle of :data:`PREDICATE_TYPE`, signed by a key of ``trusted`` (found by its hint,
    signature checked by securesystemslib's DSSE code), naming exactly the manifest's files with
    the manifest's sha256. ``where`` names the signature (``<store>/<name>/<version>/model.sig``).

    Raises:
        ModelSignatureError: missing or empty, not a bundle, a hint of no trusted key, a
            signature that does not verify, another predicate type, or other files or digests
            than the manifest's (each naming ``where``).
    """
    if data is None:
        raise ModelSignatureError(
            f"{where} is missing: the model is not signed",
            "run the same invoke upload again: it signs a stored version without model.sig "
            "(no file moves)")
    if not data.strip():
        raise ModelSignatureError(f"{where} is empty", _RESIGN)
    statement = _statement(data, where=where)
    bundle = json.loads(data)
    hint = str(((bundle.get("verificationMaterial") or {}).get("publicKey") or {}).get("hint"))
    key = _trusted(hint, trusted, where)
    envelope = bundle.get("dsseEnvelope") or {}
    if bundle.get("mediaType") != BUNDLE_TYPE or len(envelope.get("signatures") or []) != 1:
        raise ModelSignatureError(f"{where} is no bundle v0.3 with exactly one signature", _RESIGN)
    try:  # securesystemslib matches signatures to keys by keyid; model-signing's is ""
        named = SSlibKey.from_crypto(_public(key))
        verifier = SSlibKey(str(envelope["signatures"][0].get("keyid", "")), named.keytype,
                            named.scheme, named.keyval)
        Envelope.from_dict(envelope).verify([verifier], 1)
    except (sslib_errors.VerificationError, sslib_errors.FormatError, KeyError, ValueError) as e:
        raise ModelSignatureError(
            f"the signature in {where} does not verify with {key.source}: it was changed",
            _RESIGN) from e
    if statement.get("predicateType") != PREDICATE_TYPE:
        raise ModelSignatureError(
            f"{where} is a {statement.get('predicateType')!r} statement, not {PREDICATE_TYPE}",
            _RESIGN)
    _same_files(_resources(statement), am.entries_of(dict(doc)), where)
    _same_metadata((statement.get("predicate") or {}).get(METADATA), doc, where)
    return Checked(hint, key.keyid, key.source)


def _same_metadata(signed: Any, doc: Mapping[str, Any], where: str) -> None:
    """The manifest's fields besides its files are the signed ones (a trial: a manifest's image,
    metrics or Paddle version edited in the store still verified)."""
    if not isinstance(signed, str):
        raise ModelSignatureError(
            f"{where} signs the files but not the rest of manifest.json (image, metrics, "
            "Paddle version, ...)",
            "run the same invoke upload again: it signs the stored version again (no file moves)")
    try:
        before = json.loads(signed)
    except ValueError:
        before = None
    now = json.loads(metadata(doc))
    if not isinstance(before, dict):
        raise ModelSignatureError(f"{where}: its {METADATA} field is not a JSON object", _RESIGN)
    changed = sorted(k for k in {*before} | {*now} if before.get(k, ...) != now.get(k, ...))
    if changed:
        raise ModelSignatureError(
            f"{where} does not sign what manifest.json says: {', '.join(changed)} differ "
            "(the manifest changed after signing)", _RESIGN)


def _trusted(hint: str, trusted: Sequence[TrustedKey], where: str) -> TrustedKey:
    for key in trusted:
        if key_hint(_public(key)) == hint:
            return key
    raise ModelSignatureError(
        f"{where} is signed by a key that is not in release.trusted_keys (its publicKey hint, "
        f"model-signing's hex sha256 of the key's PEM: {hint[:64]})",
        "add the signer's public key to release.trusted_keys, or re-upload signed with a "
        "trusted key (artifacts.signing_key)")


def _public(key: TrustedKey) -> Any:
    return serialization.load_pem_public_key(key.key.keyval["public"].encode())


def _same_files(signed: Mapping[str, str], listed: Mapping[str, am.FileEntry], where: str) -> None:
    changed = sorted({*signed} ^ {*listed}
                     | {f for f in {*signed} & {*listed} if signed[f] != listed[f].sha256})
    if changed:
        raise ModelSignatureError(
            f"{where} does not sign the files manifest.json lists: {', '.join(changed)} "
            "differ (a file changed after signing)", _RESIGN)


def verify_folder(folder: Path, doc: Mapping[str, Any], trusted: Sequence[TrustedKey], *,
                  where: str) -> Checked:
    """Verify a model folder holding the manifest's files and ``model.sig``: :func:`check`, then
    model-signing's own verifier over the files' bytes (the key that :func:`check` found).

    Raises:
        ModelSignatureError: as :func:`check`, or a file's bytes are not the signed ones.
    """
    path = folder / SIGNATURE
    checked = check(path.read_bytes() if path.is_file() else None, doc, trusted, where=where)
    import model_signing

    key = next(k for k in trusted if k.keyid == checked.keyid)
    with tempfile.TemporaryDirectory(prefix="paddlecd-verify-") as tmp:
        public = Path(tmp) / "key.pub"
        public.write_text(key.key.keyval["public"])
        try:
            (model_signing.verifying.Config().use_elliptic_key_verifier(public_key=public)
             .verify(folder, path))
        except (ValueError, OSError, InvalidSignature) as e:  # what model-signing raises
            raise ModelSignatureError(f"{where}: the model's files are not the signed ones ({e})",
                                      _RESIGN) from e
    return checked


def signer_for(settings: Any) -> ModelSigner:
    """The key that signs models: ``artifacts.signing_key``, else verify's signing key
    (:func:`paddlecd.signing.keys.signer`: ``$PADDLECD_SIGNING_KEY``, ``verify.signing_key``, the
    state folder's pair).

    Raises:
        SigningKeyError: none configured, unreadable, or no unencrypted ECDSA P-256 key.
    """
    from paddlecd.signing import keys

    own = settings.artifacts.signing_key
    signer = keys.load_signer(settings.path(own), "artifacts.signing_key") if own \
        else keys.signer(settings)
    source = str(settings.path(own)) if own else (
        f"${keys.ENV_PEM}" if os.environ.get(keys.ENV_PEM) else "verify's signing key")
    return ModelSigner(signer.private_bytes, source)

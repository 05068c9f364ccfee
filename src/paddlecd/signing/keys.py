"""Attestation keys: the signing key verify uses, the public keys promotion trusts, and keygen.

ECDSA P-256 in PEM files: the private key is PKCS#8, the public key SubjectPublicKeyInfo.
Signing and verifying go through securesystemslib's ``CryptoSigner`` and ``SSlibKey`` (the library
in-toto uses). A signature names its key by the key's OpenSSH SHA256 fingerprint
(``SHA256:<base64>``, :func:`fingerprint`), which is also a bundle's ``publicKey.hint``: cosign and
sigstore-go verify DSSE through go-securesystemslib, which skips a signature whose keyid is not
that fingerprint of the verifying key (``dsse/verify.go``, ``SHA256KeyID``). Envelopes signed with
securesystemslib's default key id (sha256 of the key's canonical JSON) still verify.

Where the private key comes from, first match wins: ``$PADDLECD_SIGNING_KEY`` holding the PEM itself
(a CI secret), else the file ``verify.signing_key``. It is never a printed setting. The trusted keys
are ``release.trusted_keys``: files, or folders whose ``*.pub`` files are read, comma-separated.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from securesystemslib.signer import CryptoSigner, SSlibKey

from paddlecd import files
from paddlecd.config import Settings
from paddlecd.errors import SigningKeyError
from paddlecd.files import environ_value, kind_of, read_regular, regular_file
from paddlecd.types import Echo

ENV_PEM = "PADDLECD_SIGNING_KEY"
PRIVATE_NAME, PUBLIC_NAME = "paddlecd-signing.key", "paddlecd-signing.pub"
_KEYGEN_HINT = "create a pair with: invoke evidence.keygen --out <folder>"


@dataclass(frozen=True)
class TrustedKey:
    """A public key promotion accepts: securesystemslib's ``key`` (its keyid the fingerprint),
    the ``source`` file, and ``legacy``: the same key under securesystemslib's default key id."""

    key: SSlibKey
    source: str
    legacy: SSlibKey | None = None

    @property
    def keyid(self) -> str:
        """The key id signatures and bundle hints carry (``SHA256:<base64>``)."""
        return self.key.keyid

    @property
    def ids(self) -> dict[str, SSlibKey]:
        """Every key id a signature by this key may carry, with the key under that id."""
        legacy = {self.legacy.keyid: self.legacy} if self.legacy else {}
        return {self.key.keyid: self.key, **legacy}


def fingerprint(public: ec.EllipticCurvePublicKey) -> str:
    """OpenSSH's SHA256 fingerprint of ``public`` (``SHA256:`` + unpadded base64 of the sha256 of
    its SSH wire encoding), as golang.org/x/crypto/ssh ``FingerprintSHA256`` computes it."""
    line = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    wire = base64.b64decode(line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(wire).digest()).decode().rstrip("=")


def shown(keyid: str) -> str:
    """A key id as every message shows it: whole (``SHA256:<base64>``, what ``ssh-keygen -lf
    KEY.pub`` prints for the key), one form in keygen, doctor, evidence.show, promote and upload;
    an id read from a foreign document is cut at 64 characters (a message never quotes 1 MB)."""
    return keyid if len(keyid) <= 64 else keyid[:64] + "…"


def named(public: ec.EllipticCurvePublicKey) -> SSlibKey:
    """``public`` as an SSlibKey whose keyid is its :func:`fingerprint`."""
    return SSlibKey.from_crypto(public, keyid=fingerprint(public))


def keygen(folder: Path, *, note: Echo | None = None) -> tuple[Path, Path]:
    """Write a fresh ECDSA P-256 pair into ``folder`` (created): private key mode 0600.

    Each file appears whole or not at all (a temp file in the folder, fsync, then a hard link to
    its name, which never replaces a file), the private key first. A keygen killed between the
    two (trial 4: a lone private key that every re-run refused as "exists already") is
    completed by the next: a lone private key that parses gets its public key.

    Returns:
        ``(private key path, public key path)``; ``note`` is told when only the public key was
        written, for a private key an interrupted keygen left.

    Raises:
        SigningKeyError: ``folder`` is a file, the root, a system folder or inside one
            (:func:`files.place_problem`); the pair exists, or a lone public key, or a lone
            private key that is no P-256 key (never overwritten).
    """
    files.refuse_control(folder, "--out")
    if folder.exists() and not folder.is_dir():
        raise SigningKeyError(f"--out {folder} is a file, not a folder",
                              "name a folder for the pair (it is created if missing)")
    problem = files.place_problem(str(folder.resolve()), writable=True)
    if problem:
        raise SigningKeyError(f"--out {folder} {problem}: no place for a private key",
                              "name a folder of the project's or yours, e.g. ~/.paddlecd/keys")
    private, public = folder / PRIVATE_NAME, folder / PUBLIC_NAME
    for leftover in folder.glob(".keygen-*.tmp"):  # a keygen killed before its link
        leftover.unlink(missing_ok=True)
    if public.exists():
        what = "the pair exists" if private.exists() else "a public key without its private key"
        raise SigningKeyError(f"{public} exists already ({what}); keys are never overwritten",
                              "use another --out folder, or remove the old pair on purpose")
    if private.exists():  # an interrupted keygen: its key was linked whole, the .pub never was
        try:
            signer = _signer(_read(private, "private key"),
                             f"{private} (no {PUBLIC_NAME} beside it)")
        except SigningKeyError as e:  # trial 19: the hint was this very command
            raise SigningKeyError(e.cause, "keygen never overwrites a key: use another --out "
                                  f"folder, or remove {private} on purpose") from e
        _write_new(public, public_pem(signer.public_key), 0o644)
        if note:
            note(f"{private} had no public key (an interrupted keygen): wrote its {PUBLIC_NAME}")
        return private, public
    made = [p for p in (folder, *folder.parents) if not p.exists()]  # deepest first
    folder.mkdir(parents=True, exist_ok=True)
    signer = CryptoSigner.generate_ecdsa()
    try:
        _write_new(private, signer.private_bytes, 0o600)
        _write_new(public, public_pem(signer.public_key), 0o644)
    except OSError:  # a pair or nothing: a full disk removes the key and the folders it made
        private.unlink(missing_ok=True)  # (a trial: an empty --out folder was left)
        for created in made:
            with contextlib.suppress(OSError):
                created.rmdir()
        raise
    return private, public


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Write ``path`` whole or not at all, never over an existing file: a temp file beside it
    (``O_EXCL``, ``mode``), fsync, ``link(2)`` to the name (EEXIST if it is there), unlink the
    temp file. An OSError names ``path`` (a write's error names no file)."""
    fd, tmp = tempfile.mkstemp(prefix=".keygen-", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)  # mkstemp makes 0600: the public key is for everyone to read
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.link(tmp, path)
    except OSError as e:
        if e.filename is None or e.filename == tmp:
            e.filename = str(path)
        raise
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def key_id(path: Path) -> str:
    """The id of the public key in the PEM file ``path`` (:func:`fingerprint`).

    Raises:
        SigningKeyError: missing, unreadable, or no P-256 public key.
    """
    return fingerprint(_public(path))


def public_pem(key: SSlibKey) -> bytes:
    """The SubjectPublicKeyInfo PEM of ``key``, as keygen writes it."""
    return key.keyval["public"].encode()


def state_pair(settings: Settings) -> tuple[Path, Path]:
    """The pair ``evidence.keygen`` makes by default: ``<state>/keys/paddlecd-signing.{key,pub}``.

    The embedded default signs with it and trusts it when neither ``verify.signing_key`` nor
    ``release.trusted_keys`` is set, so the steps after README command 1 need no exports; a real
    project commits its public key and sets both (README, Releases).
    """
    folder = settings.state / "keys"
    return folder / PRIVATE_NAME, folder / PUBLIC_NAME


def configured(settings: Settings) -> bool:
    """True when a signing key is configured (env PEM or ``verify.signing_key``) or the state
    folder holds its own pair (:func:`state_pair`)."""
    return bool(environ_value(ENV_PEM) or settings.verify.signing_key
                or regular_file(state_pair(settings)[0], _OWN_KEY, error=SigningKeyError))


def signer(settings: Settings) -> CryptoSigner:
    """The configured signer: ``$PADDLECD_SIGNING_KEY`` (PEM), the file ``verify.signing_key``, or
    the state folder's own pair (:func:`state_pair`).

    Raises:
        SigningKeyError: none configured, the file is missing or unreadable, or it holds no
            unencrypted ECDSA P-256 private key.
    """
    pem = environ_value(ENV_PEM)
    if pem:
        if "-----BEGIN " not in pem and len(pem) < 4096 and "\n" not in pem.strip() and (
                os.path.lexists(pem.strip())):  # a trial: a path was "holds no PEM block"
            path = pem.strip()
            if not os.path.isfile(path):  # a trial: the hint said to cat a folder
                raise SigningKeyError(
                    f"${ENV_PEM} holds a path ({path[:200]}, {kind_of(Path(path))}), not the "
                    "PEM key itself", f"give {ENV_PEM} the PEM text of the key file itself, or "
                    "set verify.signing_key to the key file's path")
            raise SigningKeyError(
                f"${ENV_PEM} holds a path ({path[:200]}), not the PEM key itself",
                f"export {ENV_PEM}=\"$(cat {path[:200]})\", or set verify.signing_key "
                "to the path")
        return _signer(pem.encode(), f"${ENV_PEM}")
    own = state_pair(settings)[0]
    if not settings.verify.signing_key and regular_file(own, _OWN_KEY, error=SigningKeyError):
        return _signer(_read(own, _OWN_KEY), str(own))
    if not settings.verify.signing_key:
        raise SigningKeyError(
            "no signing key configured",
            f"set verify.signing_key to a PEM file or ${ENV_PEM} to the PEM; {_KEYGEN_HINT}",
        )
    path = settings.path(settings.verify.signing_key)
    return _signer(_read(path, "signing key (verify.signing_key)"), str(path))


def signer_source(settings: Settings) -> str:
    """Where :func:`signer` takes the key from: ``$PADDLECD_SIGNING_KEY``, the file
    ``verify.signing_key``, or the state folder's pair (whether it loads or not)."""
    if os.environ.get(ENV_PEM, "").strip():
        return f"${ENV_PEM}"
    if settings.verify.signing_key:
        return str(settings.path(settings.verify.signing_key))
    return str(state_pair(settings)[0])


def load_signer(path: Path, what: str) -> CryptoSigner:
    """The ECDSA P-256 private key in the PEM file ``path``; ``what`` names its setting.

    Raises:
        SigningKeyError: missing, unreadable, or no unencrypted ECDSA P-256 private key.
    """
    return _signer(_read(path, f"signing key ({what})"), str(path))


_OWN_KEY = "signing key (the state folder's pair)"


def _read(path: Path, what: str) -> bytes:
    if path.is_dir() and not path.is_symlink():  # trial 18: the hint said "remove what is there"
        suffix = ".pub" if what.startswith("trusted") else ".key"
        keys = sorted(p.name for p in path.glob(f"*{suffix}"))[:1]
        example = f"{path / keys[0]}" if keys else f"{path}/<name>{suffix}"
        raise SigningKeyError(f"{what} {path} is a folder, not a regular file",
                              f"name the key file itself, e.g. {example}")
    try:
        return read_regular(path, what, error=SigningKeyError)  # never blocks on a named pipe
    except FileNotFoundError as e:
        gone = f" ({kind_of(path)})" if path.is_symlink() else ""
        hint = ("fix the path in release.trusted_keys: the .pub of the key that signed (a new "
                "pair verifies nothing signed before)" if what.startswith("trusted")
                else _KEYGEN_HINT)  # trial 21: "create a pair" for a typo'd trusted key path
        raise SigningKeyError(f"{what} {path}{gone} does not exist", hint) from e
    except OSError as e:
        raise SigningKeyError(
            f"{what} {path} cannot be read: {e.strerror}", "check the path and its permissions"
        ) from e


def _signer(pem: bytes, source: str) -> CryptoSigner:
    blocks = pem.count(b"-----BEGIN ")
    if blocks > 1:  # a trial: two keys in $PADDLECD_SIGNING_KEY signed with the first, unsaid
        raise SigningKeyError(f"{source} holds {blocks} PEM blocks; a signing key is one "
                              "private key", f"give the one .key file you sign with; "
                              f"{_KEYGEN_HINT}")
    try:
        private = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as e:  # not PEM, encrypted, or a public key
        public = b"PUBLIC KEY-----" in pem
        why = _pem_problem(pem, "PRIVATE KEY")
        raise SigningKeyError(
            f"{source} is not an unencrypted PEM private key: {why}",
            _resave(pem) or (f"give the .key file, not the .pub one; {_KEYGEN_HINT}" if public
                             else _KEYGEN_HINT),
        ) from e
    if not isinstance(private, ec.EllipticCurvePrivateKey) or private.curve.name != "secp256r1":
        raise SigningKeyError(f"{source} is {_kind(private)} key, not ECDSA P-256", _KEYGEN_HINT)
    return CryptoSigner(private, public_key=named(private.public_key()))


def trusted(settings: Settings) -> list[TrustedKey]:
    """The public keys of ``release.trusted_keys`` (files, or folders of ``*.pub``); unset, the
    state folder's own public key when there is one (:func:`state_pair`).

    Raises:
        SigningKeyError: none configured or found, or a file is missing, unreadable or no P-256
            public key.
    """
    hint = "set release.trusted_keys to the committed public key(s) (files or a folder of *.pub)"
    own = state_pair(settings)[1]
    if not settings.release.trusted_keys and regular_file(
            own, "public key (the state folder's pair)", error=SigningKeyError):
        public = _public(own)
        return [TrustedKey(named(public), str(own), SSlibKey.from_crypto(public))]
    if not settings.release.trusted_keys:
        raise SigningKeyError(
            "no trusted keys configured (release.trusted_keys): no signature can be checked", hint
        )
    keys: list[TrustedKey] = []
    for item in (p.strip() for p in settings.release.trusted_keys.split(",")):
        if not item:  # a trial: "b.pub,,c.pub" skipped the empty entry unsaid (release.models
            # refuses one): a key meant for it may be missing
            raise SigningKeyError(f"release.trusted_keys has an empty entry: "
                                  f"{settings.release.trusted_keys[:200]!r}",
                                  "list the key files or folders separated by one comma")
        path = settings.path(item)
        files = sorted(path.glob("*.pub")) if path.is_dir() else [path]
        if not files:  # e.g. the workflows' default .github/attestation-keys before a key is added
            raise SigningKeyError(
                f"trusted-keys folder {item} (release.trusted_keys) holds no *.pub public key",
                f"make a pair with invoke evidence.keygen --out <folder outside the repository>, "
                f"commit its .pub into {item} and put the .key in the signing secret "
                f"({item}/README.md if it exists says how)",
            )
        for f in files:
            public = _public(f)
            if all(k.keyid != fingerprint(public) for k in keys):  # a file and its folder, or a
                # copy: one key once (a trial: the admission policy listed it twice)
                keys.append(TrustedKey(named(public), str(f), SSlibKey.from_crypto(public)))
    if not keys:
        raise SigningKeyError(
            f"release.trusted_keys={settings.release.trusted_keys!r} holds no *.pub key", hint
        )
    return keys


def _public(path: Path) -> ec.EllipticCurvePublicKey:
    pem = _read(path, "trusted key (release.trusted_keys)")
    blocks = pem.count(b"-----BEGIN ")
    if blocks > 1:  # a trial: the first of two was read, the second dropped without a word
        raise SigningKeyError(f"trusted key {path} holds {blocks} PEM blocks; a key file holds "
                              "one key", "put each key in a file of its own and list each in "
                              "release.trusted_keys")
    try:
        public = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as e:
        private = b"PRIVATE KEY-----" in pem
        raise SigningKeyError(
            f"trusted key {path} is not a PEM public key: {_pem_problem(pem, 'PUBLIC KEY')}",
            _resave(pem) or ("release.trusted_keys lists public keys (*.pub), never private "
                             "ones" if private else
                             f"list the .pub file that invoke evidence.keygen wrote; "
                             f"{_KEYGEN_HINT}"),
        ) from e
    if not isinstance(public, ec.EllipticCurvePublicKey) or public.curve.name != "secp256r1":
        raise SigningKeyError(
            f"trusted key {path} is {_kind(public)} key, not ECDSA P-256", _KEYGEN_HINT
        )
    return public


def _kind(key: object) -> str:
    """The key's algorithm with its article, as a person names it: ``an RSA``, ``an EC
    secp384r1``, ``an Ed25519`` (trial 21: cryptography's class name, ``RSAPrivateKey``)."""
    curve = getattr(key, "curve", None)
    if curve:
        return f"an EC {curve.name}"
    name = type(key).__name__.lstrip("_")
    for algorithm, article in (("RSA", "an"), ("DSA", "a"), ("Ed25519", "an"), ("Ed448", "an"),
                               ("X25519", "an"), ("X448", "an"), ("DH", "a")):
        if name.startswith(algorithm):
            return f"{article} {algorithm}"
    return f"a {name}"


def _wide_text(data: bytes) -> str | None:
    """``UTF-16`` or ``UTF-32`` when ``data`` is text in one of them (a byte-order mark, or the
    NUL bytes ASCII text has between its letters in them), else None."""
    if data[:4] in (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"):
        return "UTF-32"
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "UTF-16"
    head = data[:64]
    if len(head) >= 8 and head.count(0) * 2 >= len(head):
        return "UTF-32" if head.count(0) * 4 >= len(head) * 3 else "UTF-16"
    return None


def _resave(pem: bytes) -> str | None:
    """The hint for a key saved as UTF-16/32 text (re-save it as ASCII), else None."""
    wide = _wide_text(pem)
    return (f"save it as ASCII text, e.g. iconv -f {wide} -t ASCII KEY > KEY.pem (the key in "
            "it may be good)") if wide else None


def _pem_problem(pem: bytes, want: str) -> str:
    """What is wrong with ``pem`` when it did not load as a ``want`` (``"PUBLIC KEY"`` or
    ``"PRIVATE KEY"``), in our words: the library's own text is about ASN.1 internals."""
    label = re.search(rb"-----BEGIN ([A-Z0-9 ]+)-----", pem)
    wide = _wide_text(pem)
    if label is None and wide:  # trial 20: a UTF-16 copy "holds no PEM block", hint: keygen
        return f"it is {wide} text, and PEM is ASCII"
    if label is None:
        return "it holds no PEM block (-----BEGIN ...-----)"
    name = label.group(1).decode()
    if "ENCRYPTED" in name or b"Proc-Type: 4,ENCRYPTED" in pem:
        return f"its {name} is encrypted (paddlecd reads unencrypted keys)"
    if name.endswith(want):
        return f"its {name} block does not decode (a damaged or cut copy?)"
    return f"it holds a {name}"

"""DSSE envelopes of in-toto Statements: sign one, parse one, and check who signed it and what
it is about.

An in-toto Statement v1 (https://github.com/in-toto/attestation, ``spec/v1``) names its
``subject`` (``name`` = repository, ``digest.sha256`` = the manifest digest) and its
``predicateType``; the DSSE envelope (https://github.com/secure-systems-lab/dsse, ``payloadType``
``application/vnd.in-toto+json``) is signed by securesystemslib: the envelope, its PAE and the
signature checks are the library's, not ours. verify's evidence
(:mod:`paddlecd.verify.attestation`) and push's build provenance (:mod:`paddlecd.image.provenance`)
are both such Statements, signed with the same keys (:mod:`paddlecd.signing.keys`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from securesystemslib import exceptions as sslib_errors
from securesystemslib.dsse import Envelope
from securesystemslib.signer import Signer

from paddlecd.errors import SignatureError, SubjectError, UntrustedKeyError
from paddlecd.signing.keys import TrustedKey
from paddlecd.signing.keys import shown as shown_id

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"


@dataclass(frozen=True)
class Attestation:
    """A DSSE envelope as stored (``envelope``: its exact JSON bytes) and where it was found.

    Nothing in it is trusted before :func:`verify`: ``statement`` is the decoded, unchecked payload.

    Attributes:
        envelope: the envelope JSON. statement: the decoded in-toto Statement.
        location: ``host/repo@sha256:…`` of the artifact manifest holding it, when known.
        hint: the key a Sigstore bundle names (``verificationMaterial.publicKey.hint``); None for
            a bare envelope.
    """

    envelope: bytes
    statement: dict[str, Any] = field(repr=False)
    location: str | None = None
    hint: str | None = None

    def to_json(self) -> bytes:
        """The envelope bytes, exactly as signed and stored."""
        return self.envelope

    @classmethod
    def from_json(cls, data: bytes, location: str | None = None) -> Attestation:
        """Parse an envelope and decode its payload (not yet verified).

        Raises:
            SignatureError: no DSSE envelope of an in-toto Statement (a changed byte, not ours).
        """
        where = location or "the attestation"
        try:
            env = Envelope.from_dict(json.loads(data))
            if env.payload_type != PAYLOAD_TYPE:
                raise ValueError(f"payloadType {env.payload_type!r}")
            doc = json.loads(env.payload)
            if not isinstance(doc, dict):
                raise ValueError("payload is no JSON object")
        except (ValueError, KeyError, TypeError, sslib_errors.FormatError) as e:
            raise SignatureError(
                f"{where} is no DSSE envelope of an in-toto Statement ({e})",
                "it was changed or written by another tool; re-run invoke verify",
            ) from e
        return cls(bytes(data), doc, location)

    @property
    def keyids(self) -> list[str]:
        """Key ids of the envelope's signatures (unverified)."""
        return [s.get("keyid", "") for s in json.loads(self.envelope).get("signatures", [])]


@dataclass(frozen=True)
class Signed:
    """A Statement whose signature, subject and predicate type were checked (:func:`check`).

    Attributes:
        digest: the image digest it is about. name: the subject's repository name.
        keyid, key_source: the trusted key that verified it and the file it came from.
        predicate: the signed predicate, as signed.
    """

    digest: str
    name: str
    keyid: str
    key_source: str
    predicate: dict[str, Any] = field(repr=False)


def sign_statement(doc: Mapping[str, Any], signer: Signer) -> Attestation:
    """Sign the in-toto Statement ``doc`` (any predicate type) in a DSSE envelope with
    ``signer``: the payload is ``doc`` as JSON with sorted keys."""
    payload = json.dumps(doc, sort_keys=True).encode()
    envelope = Envelope(payload, PAYLOAD_TYPE, {})
    envelope.sign(signer)
    return Attestation.from_json(json.dumps(envelope.to_dict(), sort_keys=True).encode())


def check(att: Attestation, keys: Sequence[TrustedKey], digest: str, *, predicate_type: str,
          other_type_hint: str) -> Signed:
    """Check ``att``: signed by one of ``keys``, about ``digest``, of ``predicate_type``;
    ``other_type_hint`` is the hint when it is a Statement of another type.

    Raises:
        SignatureError: the signature does not verify (a changed byte) or no trusted key signed it.
        SubjectError: the Statement is about another digest, or of another type.
    """
    where = att.location or "the attestation"
    key = _signer(att, keys, where)
    doc = att.statement
    if doc.get("_type") != STATEMENT_TYPE or doc.get("predicateType") != predicate_type:
        raise SubjectError(
            f"{where} is a {doc.get('predicateType')!r} statement, not {predicate_type}",
            other_type_hint,
        )
    subjects = [
        s for s in doc.get("subject", []) if s.get("digest", {}).get("sha256") == digest[7:]
    ]
    if not subjects:
        other = ", ".join(
            f"sha256:{s.get('digest', {}).get('sha256')}" for s in doc.get("subject", [])
        )
        raise SubjectError(
            f"{where} is about {other or 'no digest'}, not {digest}",
            "an attestation proves only the digest it names; verify this digest",
        )
    return Signed(digest=digest, name=str(subjects[0].get("name", "")), keyid=key.keyid,
                  key_source=key.source, predicate=dict(doc.get("predicate") or {}))


def _signer(att: Attestation, keys: Sequence[TrustedKey], where: str) -> TrustedKey:
    """The trusted key whose signature of ``att``'s envelope verifies (SignatureError: a hint
    or signature by no trusted key, or a changed byte)."""
    by_id = {i: (k, key) for k in keys for i, key in k.ids.items()}
    if att.hint is not None and att.hint not in by_id:
        raise UntrustedKeyError(
            f"{where} names key {shown_id(att.hint)} (its publicKey hint), which is not in "
            "release.trusted_keys",
            "verify with a trusted key, or add its public key to release.trusted_keys",
        )
    signers = [i for i in att.keyids if i in by_id]
    if not signers:
        raise UntrustedKeyError(
            f"{where} is signed by key {', '.join(map(shown_id, att.keyids)) or 'none'}, "
            "which is not in release.trusted_keys",
            "verify with a trusted key, or add its public key to release.trusted_keys",
        )
    try:
        accepted = Envelope.from_dict(json.loads(att.envelope)).verify(
            [by_id[i][1] for i in signers], 1
        )
    except sslib_errors.VerificationError as e:
        raise SignatureError(
            f"the signature of {where} does not verify: the envelope or payload was changed",
            "never edit an attestation; re-run invoke verify to attest the image again",
        ) from e
    return by_id[next(iter(accepted))][0]

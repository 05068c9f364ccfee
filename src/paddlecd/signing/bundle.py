"""Sigstore bundles: verify's DSSE envelope in the form cosign, Kyverno and sigstore-js read.

A bundle v0.3 (sigstore/protobuf-specs ``protos/sigstore_bundle.proto``, JSON as protobuf's JSON
mapping: camelCase keys) for a key-signed attestation with no transparency log::

    {"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
     "verificationMaterial": {"publicKey": {"hint": KEYID}, "tlogEntries": []},
     "dsseEnvelope": {"payload": B64, "payloadType": "application/vnd.in-toto+json",
                      "signatures": [{"sig": B64, "keyid": KEYID}]}}

The hint names the verifier's key; sigstore-js looks the key up by it (``toTrustMaterial``'s key
selector, sigstore-js ``packages/verify/src/trust/index.ts``). It is the keyid the signature
carries, the key's OpenSSH fingerprint (:func:`paddlecd.signing.keys.fingerprint`): cosign and
sigstore-go skip a DSSE signature whose keyid is anything else. Parsing is strict on what paddlecd
relies on (exactly one signature, keyid = hint); the signature itself is checked by
:func:`paddlecd.signing.dsse.check`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from paddlecd.errors import SignatureError
from paddlecd.signing.dsse import Attestation
from paddlecd.signing.keys import shown as shown_id

BUNDLE_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
_REWRITE = "never edit a bundle; re-run invoke verify to attest the image again"


def to_bundle(att: Attestation) -> bytes:
    """The bundle v0.3 bytes (sorted keys, compact) holding ``att``'s envelope.

    Raises:
        SignatureError: the envelope has not exactly one signature (paddlecd signs with one key).
    """
    envelope = json.loads(att.envelope)
    [keyid] = _one_signature(envelope, "the envelope to bundle")
    doc = {
        "mediaType": BUNDLE_TYPE,
        "verificationMaterial": {"publicKey": {"hint": keyid}, "tlogEntries": []},
        "dsseEnvelope": envelope,
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def from_bundle(data: bytes, location: str | None = None) -> Attestation:
    """The :class:`Attestation` inside bundle ``data`` (unverified), with its ``hint``.

    Raises:
        SignatureError: not a bundle v0.3 with a DSSE envelope, not exactly one signature, or a
            keyid other than the hint (each naming ``location``).
    """
    where = location or "the bundle"
    try:
        doc = json.loads(data)
        material = doc["verificationMaterial"]
        hint = material["publicKey"]["hint"]
        envelope = doc["dsseEnvelope"]
        if doc.get("mediaType") != BUNDLE_TYPE:
            raise ValueError(f"mediaType {doc.get('mediaType')!r}, not {BUNDLE_TYPE}")
        if not isinstance(hint, str) or not hint or not isinstance(envelope, dict):
            raise ValueError("no publicKey hint or no dsseEnvelope object")
    except (ValueError, KeyError, TypeError) as e:
        raise SignatureError(f"{where} is no Sigstore bundle v0.3 of a DSSE envelope ({e})",
                             _REWRITE) from e
    keyids = _one_signature(envelope, where)
    if keyids != [hint]:
        raise SignatureError(
            f"{where}: the signature's keyid {shown_id(keyids[0])!r} differs from the "
            f"bundle's publicKey hint {shown_id(hint)!r}",
            "cosign and paddlecd require keyid = hint; " + _REWRITE,
        )
    att = Attestation.from_json(json.dumps(envelope, sort_keys=True).encode(), location)
    return dataclasses.replace(att, hint=hint)


def _one_signature(envelope: dict[str, Any], where: str) -> list[str]:
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or len(signatures) != 1:
        count = len(signatures) if isinstance(signatures, list) else 0
        raise SignatureError(
            f"{where} holds {count} signatures; a paddlecd attestation has exactly one",
            "sign once per verify run (one envelope, one key); " + _REWRITE,
        )
    return [str((signatures[0] or {}).get("keyid", ""))]

"""Sigstore bundles without a registry: the layout, strict parsing by Sigstore's own model
(PyPI sigstore-models), and each bad input as one typed error naming it, with a hint."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from cryptography.hazmat.primitives import serialization
from securesystemslib.signer import CryptoSigner
from sigstore_models.bundle.v1 import Bundle

from paddlecd import config
from paddlecd.errors import ConfigError, SignatureError
from paddlecd.signing import bundle, keys
from paddlecd.verify import attestation

DIGEST = "sha256:" + "ab" * 32
RECORD = {"digest": DIGEST, "reference": f"127.0.0.1:5000/ci/paddle@{DIGEST}", "passed": True,
          "created": "2026-12-01T00:00:00Z", "checks": []}


@pytest.fixture
def pair(tmp_path):
    private, public = keys.keygen(tmp_path / "keys")
    settings = config.load(
        {"verify.signing_key": str(private), "release.trusted_keys": str(public)},
        root=tmp_path, environ={},
    )
    return keys.signer(settings), keys.trusted(settings)


def _bundle(signer) -> bytes:
    return bundle.to_bundle(attestation.sign(RECORD, signer, junit=b"j", log=b"l"))


def test_bundle_v03_with_the_key_hint_and_no_tlog(pair):
    signer, trusted = pair
    doc = json.loads(_bundle(signer))
    assert doc["mediaType"] == "application/vnd.dev.sigstore.bundle.v0.3+json"
    assert doc["verificationMaterial"] == {"publicKey": {"hint": trusted[0].keyid},
                                           "tlogEntries": []}
    envelope = doc["dsseEnvelope"]
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert [s["keyid"] for s in envelope["signatures"]] == [trusted[0].keyid]


def test_sigstore_models_parses_the_bundle_strictly(pair):
    raw = _bundle(pair[0])
    parsed = Bundle.from_json(raw)
    assert parsed.media_type == bundle.BUNDLE_TYPE
    assert parsed.verification_material.public_key.hint == pair[1][0].keyid
    doc = json.loads(raw)
    doc["verificationMaterial"]["publicKey"]["keyHint"] = "x"  # a field the spec does not have
    with pytest.raises(ValueError):
        Bundle.from_json(json.dumps(doc))


def test_round_trip_verifies(pair):
    signer, trusted = pair
    att = bundle.from_bundle(_bundle(signer), "reg/ci/paddle@sha256:" + "c" * 64)
    assert att.hint == trusted[0].keyid
    assert attestation.verify(att, trusted, DIGEST).keyid == trusted[0].keyid


def _changed(raw: bytes, change) -> bytes:
    doc = json.loads(raw)
    change(doc)
    return json.dumps(doc).encode()


def _two_signatures(doc):
    doc["dsseEnvelope"]["signatures"].append(dict(doc["dsseEnvelope"]["signatures"][0]))


def _other_keyid(doc):
    doc["dsseEnvelope"]["signatures"][0]["keyid"] = "f" * 64


@pytest.mark.parametrize("change, words", [
    (_two_signatures, "holds 2 signatures; a paddlecd attestation has exactly one"),
    (_other_keyid, "the signature's keyid '" + "f" * 64 + "' differs from the bundle's publicKey"),
    (lambda d: d.update(mediaType="application/json"), "is no Sigstore bundle v0.3"),
    (lambda d: d.pop("dsseEnvelope"), "is no Sigstore bundle v0.3"),
])
def test_bad_bundles_are_one_typed_error_naming_the_input(pair, change, words):
    where = "127.0.0.1:5000/ci/paddle@sha256:" + "c" * 64
    with pytest.raises(SignatureError) as info:
        bundle.from_bundle(_changed(_bundle(pair[0]), change), where)
    assert words in info.value.cause and where in info.value.cause
    assert "\n" not in info.value.cause and info.value.hint and info.value.exit_code == 7


def test_a_hint_that_names_no_trusted_key_is_refused(pair):
    other = CryptoSigner.generate_ecdsa()  # signed, hinted and keyid'd consistently, untrusted
    att = bundle.from_bundle(_bundle(other), "the referrer")
    with pytest.raises(SignatureError) as info:
        attestation.verify(att, pair[1], DIGEST)
    assert "the referrer names key" in info.value.cause
    assert "not in release.trusted_keys" in info.value.cause and info.value.hint


@pytest.mark.parametrize("value, layouts", [
    ("bundle,att", ("bundle", "att")), ("att", ("att",)), (" att , bundle ", ("bundle", "att")),
])
def test_layout_setting(tmp_path, value, layouts):
    settings = config.load({"verify.attestation_layouts": value}, root=tmp_path, environ={})
    assert config.attestation_layouts(settings) == layouts


@pytest.mark.parametrize("value", ["sig", ",", "bundle,cosign"])
def test_bad_layout_setting_is_refused_on_load(tmp_path, value):
    with pytest.raises(ConfigError, match="verify.attestation_layouts"):
        config.load({"verify.attestation_layouts": value}, root=tmp_path, environ={})
    assert config.attestation_layouts(config.load({}, root=tmp_path, environ={})) == (
        "bundle", "att")


def test_keyid_and_hint_are_the_keys_openssh_fingerprint(pair, tmp_path):
    """cosign and sigstore-go verify DSSE with go-securesystemslib, which skips a signature whose
    keyid differs from ``SHA256KeyID`` of the verifying key (ssh.FingerprintSHA256): the keyid
    paddlecd signs with is that fingerprint, checked here against OpenSSH's ssh-keygen."""
    signer, trusted = pair
    doc = json.loads(_bundle(signer))
    keyid = doc["dsseEnvelope"]["signatures"][0]["keyid"]
    assert keyid == doc["verificationMaterial"]["publicKey"]["hint"] == trusted[0].keyid
    if not shutil.which("ssh-keygen"):
        pytest.skip("no ssh-keygen to compare the fingerprint with")
    public = serialization.load_pem_public_key(keys.public_pem(trusted[0].key))
    line = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    (tmp_path / "key.pub").write_bytes(line + b" paddlecd\n")
    listed = subprocess.run(["ssh-keygen", "-l", "-f", str(tmp_path / "key.pub")], check=True,
                            capture_output=True, text=True).stdout.split()
    assert listed[1] == keyid


def test_envelopes_signed_with_the_securesystemslib_key_id_still_verify(tmp_path, pair):
    """What verify signed before the fingerprint became the keyid (the paddlecd v1 artifact)."""
    _, trusted = pair
    pem = (tmp_path / "keys" / keys.PRIVATE_NAME).read_bytes()
    old = CryptoSigner(serialization.load_pem_private_key(pem, password=None))
    att = attestation.sign(RECORD, old, junit=b"j", log=b"l")
    assert att.keyids == [trusted[0].legacy.keyid] != [trusted[0].keyid]
    assert attestation.verify(att, trusted, DIGEST).keyid == trusted[0].keyid

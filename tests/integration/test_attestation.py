"""Signed verification attestations in a real registry.

The referrers tag schema (``sha256-<hex>`` index) is tested against the real CNCF distribution 2.8
registry of the other integration tests (htpasswd auth over TLS), which has no referrers API. The
referrers API path is tested against tests/integration/scripted_registry.py, a scripted loopback
HTTP server: no registry with the API can be installed on these machines. Signatures are checked
here by code paddlecd did not write: securesystemslib's DSSE verifier, and ``cryptography`` on the
DSSE PAE bytes built in this file from the DSSE spec. skopeo, an independent client, reads what
was written.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
import requests
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from scripted_registry import ScriptedRegistry
from securesystemslib.dsse import Envelope
from securesystemslib.signer import CryptoSigner, SSlibKey
from test_release import Project

from paddlecd import config
from paddlecd.errors import (
    AttestedFailureError,
    NoAttestationError,
    RegistryError,
    SignatureError,
    SigningKeyError,
    SubjectError,
)
from paddlecd.files import now_iso
from paddlecd.registry import cosign, referrers
from paddlecd.registry.client import client_for
from paddlecd.signing import bundle, dsse, keys
from paddlecd.verify import attestation, evidence, registry_store

from support import invoke
from support.oci_images import push_image

ROOT = Path(__file__).resolve().parents[2]
JUNIT, LOG = b'<testsuite name="smoke"/>', b"smoke log\n"


@pytest.fixture
def project(registry_env, tmp_path) -> Project:
    return Project(tmp_path)


def _invoke(project: Project, *args: str, **env: str) -> subprocess.CompletedProcess:
    return invoke(*args, env={**os.environ, **project.env(), **env}, timeout=300)


def _record(project: Project, digest: str, **changes) -> dict:
    """An evidence record of a passing complete run, as verify writes it."""
    return {
        "digest": digest,
        "reference": f"{project.settings.candidate_repo}@{digest}",
        "variant": "cpu",
        "passed": True,
        "created": now_iso(),
        "versions": {"paddle": "3.0.0"},
        "checks": [
            {
                "name": f"{m}/test_{m}",
                "passed": True,
                "duration_s": 0.1,
                "metrics": {"busbw_gbps": 1.5},
                "message": "",
            }
            for m in evidence.REQUIRED_CHECKS
        ],
        **changes,
    }


def _push_envelope(project: Project, subject: str, envelope: bytes) -> referrers.Referrer:
    """Attach ``envelope`` (with the JUnit/log layers its statement names) to ``subject``."""
    client, repo = project.client, project.settings.registry.repository
    layers = [
        referrers.Layer(registry_store.ENVELOPE_TYPE, envelope, registry_store.ENVELOPE_FILE),
        referrers.Layer(registry_store.JUNIT_TYPE, JUNIT, "junit.xml"),
        referrers.Layer(registry_store.LOG_TYPE, LOG, "smoke.log"),
    ]
    return referrers.push(
        client,
        repo,
        client.resolve(repo, subject),
        artifact_type=registry_store.ARTIFACT_TYPE,
        layers=layers,
        annotations={},
    )


def _sign(project: Project, record: dict, signer=None) -> bytes:
    return attestation.sign(
        record, signer or keys.signer(project.settings), junit=JUNIT, log=LOG
    ).envelope


def _tampered(envelope: bytes, where: str) -> bytes:
    doc = json.loads(envelope)
    if where == "payload":  # one byte of the signed statement: a metric 1.5 → 9.5
        payload = base64.b64decode(doc["payload"]).replace(
            b'"busbw_gbps": 1.5', b'"busbw_gbps": 9.5', 1
        )
        doc["payload"] = base64.b64encode(payload).decode()
    else:  # one byte of the signature
        sig = bytearray(base64.b64decode(doc["signatures"][0]["sig"]))
        sig[-1] ^= 0x01
        doc["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    return json.dumps(doc).encode()


# ------------------------------------------------------------------ the signed path, end to end


def test_promote_from_a_second_machine_uses_the_registry_attestation(project, tmp_path):
    digest = project.candidate()
    machine2 = project.with_state(tmp_path / "machine2")  # no candidate, no evidence file
    assert evidence.load(machine2, digest) is None
    out = project.promote("1.4.0", settings=machine2, digest=digest)
    [record] = project.records()
    release_repo = project.settings.release.repository
    [listed] = referrers.referrers(project.client, release_repo, digest, bundle.BUNDLE_TYPE)
    # the bundle referrer, the .att tag and the JUnit/log referrer, each copied once
    assert record.attestation == listed.digest and out.attestation_copied["copied"] == 3
    assert cosign.att_tag(digest) in project.client.list_tags(release_repo)
    # distribution 2.8 has no referrers API: the release repository holds the sha256-<hex> index
    assert referrers.tag_for(digest) in project.client.list_tags(release_repo)
    # the release proves itself from the release repository alone
    proof = registry_store.check(machine2, project.client, release_repo, digest, "cpu")
    assert proof.passed and proof.keyid == keys.trusted(machine2)[0].keyid
    assert proof.location == f"{project.settings.release_repo}@{listed.digest}"
    assert len(proof.stored) == 3 and proof.stored[1].startswith(
        f"{project.settings.release_repo}:{cosign.att_tag(digest)}@sha256:")


def test_signature_verified_by_implementations_paddlecd_did_not_write(project):
    digest = push_image(project.client, project.settings.registry.repository)
    att = project.evidence(digest)
    repo = project.settings.registry.repository
    [listed] = referrers.referrers(project.client, repo, digest, bundle.BUNDLE_TYPE)
    manifest = project.client.get_manifest(repo, listed.digest).json()
    held = json.loads(referrers.read_blob(project.client, repo, manifest["layers"][0]["digest"]))
    stored = json.dumps(held["dsseEnvelope"], sort_keys=True).encode()
    assert stored == att.envelope and manifest["subject"]["digest"] == digest
    public = serialization.load_pem_public_key(
        Path(project.flags["release.trusted_keys"]).read_bytes()
    )
    # 1. securesystemslib's DSSE verifier with the committed public key, under the keyid the
    #    signature carries (the key's OpenSSH fingerprint, what cosign's DSSE verifier computes)
    keyid = json.loads(stored)["signatures"][0]["keyid"]
    hint = held["verificationMaterial"]["publicKey"]["hint"]
    assert keyid.startswith("SHA256:") and keyid == hint
    Envelope.from_dict(json.loads(stored)).verify([SSlibKey.from_crypto(public, keyid=keyid)], 1)
    # 2. cryptography on PAE(payloadType, payload), built here from the DSSE spec (protocol.md)
    doc = json.loads(stored)
    payload, ptype = base64.b64decode(doc["payload"]), doc["payloadType"].encode()
    pae = b"DSSEv1 %d %b %d %b" % (len(ptype), ptype, len(payload), payload)
    signature = base64.b64decode(doc["signatures"][0]["sig"])
    public.verify(signature, pae, ec.ECDSA(hashes.SHA256()))
    with pytest.raises(InvalidSignature):
        public.verify(signature, pae.replace(b"true", b"fals", 1), ec.ECDSA(hashes.SHA256()))
    statement = json.loads(payload)
    assert (
        statement["_type"] == "https://in-toto.io/Statement/v1"
        and ptype == b"application/vnd.in-toto+json"
    )
    assert statement["subject"] == [
        {"name": project.settings.candidate_repo, "digest": {"sha256": digest[7:]}}
    ]
    assert statement["predicateType"] == attestation.PREDICATE_TYPE
    [byproducts] = referrers.referrers(project.client, repo, digest, registry_store.BYPRODUCTS_TYPE)
    layers = {
        x["annotations"]["org.opencontainers.image.title"]: x["digest"]
        for x in project.client.get_manifest(repo, byproducts.digest).json()["layers"]
    }
    for name in ("junit.xml", "smoke.log"):
        assert f"sha256:{statement['predicate']['byproducts'][name]['sha256']}" == layers[name]


def test_skopeo_reads_the_artifact_and_the_referrers_index(project, registry, tmp_path):
    digest = push_image(project.client, project.settings.registry.repository)
    project.evidence(digest)
    certs = tmp_path / "certs"
    certs.mkdir()
    shutil.copy(registry.ca_file, certs / "ca.crt")
    repo = f"docker://{project.settings.candidate_repo}"
    auth = ["--creds", "ci:s3cret-Pa55", "--cert-dir", str(certs)]

    def skopeo(*args: str) -> str:
        return subprocess.run(
            ["skopeo", *args], check=True, capture_output=True, text=True, timeout=120
        ).stdout

    index = json.loads(skopeo("inspect", "--raw", *auth, f"{repo}:{referrers.tag_for(digest)}"))
    [entry] = [e for e in index["manifests"] if e["artifactType"] == bundle.BUNDLE_TYPE]
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    manifest = json.loads(skopeo("inspect", "--raw", *auth, f"{repo}@{entry['digest']}"))
    assert (
        manifest["subject"]["digest"] == digest
        and manifest["config"]["mediaType"] == referrers.EMPTY_TYPE
    )
    skopeo(
        "copy",
        "--src-creds",
        "ci:s3cret-Pa55",
        "--src-cert-dir",
        str(certs),
        f"{repo}@{entry['digest']}",
        f"dir:{tmp_path / 'copy'}",
    )
    held = json.loads((tmp_path / "copy" / manifest["layers"][0]["digest"][7:]).read_bytes())
    assert held["dsseEnvelope"]["payloadType"] == "application/vnd.in-toto+json"


def test_every_run_is_kept_and_the_newest_decides(project):
    digest = project.candidate(age_hours=2)
    project.evidence(digest, passed=False, age_hours=1)  # a later run of the same digest failed
    repo = project.settings.registry.repository
    assert len(referrers.referrers(project.client, repo, digest, bundle.BUNDLE_TYPE)) == 2
    assert len(cosign.read_att(project.client, repo, digest)[1]) == 2
    with pytest.raises(
        AttestedFailureError, match=r"a newer run \(.*\) failed after the passing run"
    ):
        project.promote("1.4.0", digest=digest)
    assert project.client.list_tags(project.settings.release.repository) == []
    project.evidence(digest)  # fixed and verified again: the newest run passes
    assert project.promote("1.4.0", digest=digest).plan.attestation.passed


def test_concurrent_writers_keep_every_entry(project):
    digest = push_image(project.client, project.settings.registry.repository)
    envelopes = [_sign(project, _record(project, digest, duration_s=i)) for i in range(4)]
    barrier, errors = threading.Barrier(4), []

    def push(envelope: bytes) -> None:
        try:
            barrier.wait()
            _push_envelope(project, digest, envelope)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=push, args=(e,)) for e in envelopes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert (
        len(referrers.referrers(project.client, project.settings.registry.repository, digest)) == 4
    )


# ------------------------------------------------------------- bad input: error, exit code, no tag


@pytest.mark.parametrize(
    "kind, words",
    [
        ("payload byte", "signature of .* does not verify"),
        ("signature byte", "signature of .* does not verify"),
        ("untrusted key", "not in release.trusted_keys"),
        ("other subject", "is about sha256:.*, not sha256:"),
        ("expired", "is stale: 2"),
        ("none", "no attestation of sha256:"),
    ],
)
def test_promotion_refuses_bad_attestations(project, kind, words):
    digest = push_image(project.client, project.settings.registry.repository)
    record = _record(project, digest)
    if kind in ("payload byte", "signature byte"):
        _push_envelope(project, digest, _tampered(_sign(project, record), kind.split()[0]))
    elif kind == "untrusted key":
        _push_envelope(project, digest, _sign(project, record, CryptoSigner.generate_ecdsa()))
    elif kind == "other subject":
        other = push_image(project.client, project.settings.registry.repository)
        _push_envelope(project, digest, _sign(project, _record(project, other)))
    elif kind == "expired":
        project.evidence(digest, age_hours=200)
    run = _invoke(
        project, "promote", "--variant", "cpu", "--version", "1.4.0", "--digest", digest, "--yes"
    )
    assert run.returncode == 7, run.stderr
    [error] = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert "refused:" in error and re.search(words, error), error
    assert "hint:" in run.stderr and "--force" in run.stderr
    assert project.client.list_tags(project.settings.release.repository) == []


@pytest.mark.parametrize(
    "error, case",
    [
        (SignatureError, "payload byte"),
        (SignatureError, "untrusted key"),
        (SubjectError, "other subject"),
        (NoAttestationError, "none"),
    ],
)
def test_each_refusal_is_one_typed_error(project, error, case):
    digest = push_image(project.client, project.settings.registry.repository)
    if case == "payload byte":
        _push_envelope(
            project, digest, _tampered(_sign(project, _record(project, digest)), "payload")
        )
    elif case == "untrusted key":
        _push_envelope(
            project, digest, _sign(project, _record(project, digest), CryptoSigner.generate_ecdsa())
        )
    elif case == "other subject":
        other = push_image(project.client, project.settings.registry.repository)
        _push_envelope(project, digest, _sign(project, _record(project, other)))
    with pytest.raises(error) as info:
        registry_store.check(
            project.settings, project.client, project.settings.registry.repository, digest, "cpu"
        )
    assert info.value.exit_code == 7 and info.value.hint and "\n" not in info.value.cause


def _bad_key(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"bad-{kind.replace(' ', '-')}.key"
    if kind == "unreadable":
        path.mkdir()  # reading a folder fails even as root
    elif kind == "wrong type":
        rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        path.write_bytes(
            rsa_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    elif kind == "public key":
        path.write_bytes(keys.public_pem(CryptoSigner.generate_ecdsa().public_key))
    return path


@pytest.mark.parametrize(
    "kind, words",
    [
        ("missing", "does not exist"),
        ("unreadable", "is a folder, not a regular file"),  # trial 9: named, never opened
        ("wrong type", "is an RSA key, not ECDSA P-256"),
        ("public key", "not an unencrypted PEM private key"),
    ],
)
def test_bad_signing_key_stops_verify_before_it_runs(project, tmp_path, kind, words):
    digest = push_image(project.client, project.settings.registry.repository)
    image = f"{project.settings.candidate_repo}@{digest}"
    run = _invoke(
        project,
        "verify",
        "--image",
        image,
        PADDLECD_VERIFY_SIGNING_KEY=str(_bad_key(tmp_path, kind)),
    )
    assert run.returncode == 2 and words in run.stderr and "hint:" in run.stderr, run.stderr
    assert referrers.referrers(project.client, project.settings.registry.repository, digest) == []
    assert evidence.load(project.settings, digest) is None


def test_signing_key_from_the_environment(project, tmp_path):
    digest = push_image(project.client, project.settings.registry.repository)
    bad = _invoke(
        project,
        "verify",
        "--image",
        f"{project.settings.candidate_repo}@{digest}",
        PADDLECD_SIGNING_KEY="not a key",
    )
    assert (
        bad.returncode == 2
        and "$PADDLECD_SIGNING_KEY is not an unencrypted PEM private key" in bad.stderr
    )
    assert "not a key" not in bad.stdout + bad.stderr.replace("$PADDLECD_SIGNING_KEY", "")
    pem = Path(project.flags["verify.signing_key"]).read_text()
    settings = config.load({**project.flags, "verify.signing_key": None}, root=ROOT)
    assert settings.verify.signing_key is None
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(keys.ENV_PEM, pem)
        att = registry_store.publish(settings, _record(project, digest), tmp_path)
    assert att.keyids == [keys.trusted(settings)[0].keyid]


def test_untrusted_key_file_of_the_wrong_kind(project, tmp_path):
    digest = project.candidate()
    run = _invoke(
        project,
        "promote",
        "--variant",
        "cpu",
        "--version",
        "1.4.0",
        "--digest",
        digest,
        "--yes",
        PADDLECD_RELEASE_TRUSTED_KEYS=project.flags["verify.signing_key"],
    )
    assert run.returncode == 2 and "is not a PEM public key" in run.stderr, run.stderr
    assert project.client.list_tags(project.settings.release.repository) == []
    with pytest.raises(SigningKeyError, match="holds no \\*.pub public key"):
        keys.trusted(
            config.load({**project.flags, "release.trusted_keys": str(tmp_path)}, root=ROOT)
        )


def test_force_with_reason_still_overrides(project):
    digest = push_image(project.client, project.settings.registry.repository)
    project.promote("1.4.0", digest=digest, force=True, reason="GPU runner down; verified by hand")
    [record] = project.records()
    assert record.forced and record.attestation is None and project.tag("1.4.0-cpu") == digest


def test_force_never_promotes_a_digest_verified_as_another_variant(project):
    """Trial 7: a digest verified as cpu, promoted with --variant cu126, was refused with the
    hint "…; or --force --reason", and with --force the plan wrote 1.0.0-cu126 and latest-cu126
    for a CPU image. --force is for missing evidence, never for the wrong variant."""
    from paddlecd.errors import VariantMismatchError

    digest = project.candidate()
    for force in (False, True):
        with pytest.raises(VariantMismatchError) as e:
            project.promote("1.4.0", digest=digest, variant="cu126", force=force,
                            reason="t7" if force else None, execute=False)
        assert "is of variant 'cpu', not 'cu126'" in e.value.cause
        assert "--force" not in e.value.hint
    assert project.client.list_tags(project.settings.release.repository) == []


# ------------------------------------------------------------------ reading: evidence.show


def test_evidence_show_by_digest_and_by_release(project):
    digest = project.candidate()
    project.promote("1.4.0")
    by_ref = _invoke(project, "evidence.show", f"{project.settings.candidate_repo}@{digest}")
    by_release = _invoke(project, "evidence.show", "1.4.0-cpu")
    for run in (by_ref, by_release):
        assert run.returncode == 0, run.stderr
        assert (
            "(PASSED)" in run.stdout
            and f"@{digest}" in run.stdout
            and "busbw_gbps=1.25" in run.stdout
        )
        assert "key:" in run.stdout and project.flags["release.trusted_keys"] in run.stdout
    assert project.settings.release_repo in by_release.stdout
    _push_envelope(project, digest, _tampered(_sign(project, _record(project, digest)), "payload"))
    shown = _invoke(project, "evidence.show", f"{project.settings.candidate_repo}@{digest}")
    assert "REJECTED: the signature of" in shown.stdout and "(PASSED)" in shown.stdout
    # an image no registry holds is not found (trial 19: "no attestation", hint "run verify")
    none = _invoke(project, "evidence.show", f"{project.settings.candidate_repo}@sha256:{'0' * 64}")
    assert none.returncode == 5 and "not found (HTTP 404)" in none.stderr, none.stderr


def test_evidence_show_fails_when_every_attestation_is_rejected_and_reads_a_tag(project):
    """A trial: evidence.show exited 0 when every attestation was rejected, and repo:tag was
    taken for a release name ("names no known variant")."""
    digest = push_image(project.client, project.settings.registry.repository, "shown-by-tag")
    _push_envelope(project, digest, _tampered(_sign(project, _record(project, digest)), "payload"))
    tagged = f"{project.settings.candidate_repo}:shown-by-tag"
    shown = _invoke(project, "evidence.show", tagged)
    assert shown.returncode == 7, shown.stdout + shown.stderr
    assert f"resolved {tagged} to {project.settings.candidate_repo}@{digest}" in shown.stderr
    assert "REJECTED" in shown.stdout and "(PASSED)" not in shown.stdout
    assert "error: none of the 1 attestation(s) of" in shown.stderr


def test_evidence_show_fails_when_every_signed_run_failed(project):
    """Trial 4: an image whose every verify run FAILED was listed and exit 0, so
    ``evidence.show X && deploy X`` went ahead."""
    digest = push_image(project.client, project.settings.registry.repository, "all-failed")
    project.evidence(digest, passed=False)
    ref = f"{project.settings.candidate_repo}@{digest}"
    shown = _invoke(project, "evidence.show", ref)
    assert shown.returncode == 7, shown.stdout + shown.stderr
    assert "(FAILED)" in shown.stdout and "(PASSED)" not in shown.stdout
    assert shown.stderr.splitlines()[-2] == (f"error: no passing verify run of {ref}: 1 signed "
                                             "run(s), it failed")


# ------------------------------------------------------------------ the figure: bytes on the wire


def test_promotion_with_attestation_moves_at_most_64_kib(project, monkeypatch):
    digest = project.candidate()
    moved = {"bytes": 0}
    send = requests.Session.send

    def counting(self, request, **kwargs):
        response = send(self, request, **kwargs)
        body = request.body if isinstance(request.body, bytes) else b""
        # a streamed body is read by its caller: count its declared length, do not read it here
        down = (
            int(response.headers.get("Content-Length") or 0)
            if kwargs.get("stream")
            else len(response.content)
        )
        moved["bytes"] += len(body) + down
        return response

    monkeypatch.setattr(requests.Session, "send", counting)
    out = project.promote("1.4.0", digest=digest)
    assert out.attestation_copied["copied"] == 3 and out.plan.attestation.passed
    assert moved["bytes"] <= 64 * 1024, moved
    print(f"promotion with attestation lookup and copy moved {moved['bytes']} bytes")


# ------------------------------------------------------------- the referrers API (scripted server)


@pytest.fixture
def scripted(tmp_path):
    server = ScriptedRegistry().start()
    private, public = keys.keygen(tmp_path / "keys")
    settings = config.load(
        {
            "registry.url": server.host,
            "registry.repository": "ci/paddle",
            "state_dir": str(tmp_path / "state"),
            "verify.signing_key": str(private),
            "release.trusted_keys": str(public),
        },
        root=ROOT,
        environ={},
    )
    yield server, settings
    server.stop()


def test_referrers_api_is_used_where_the_registry_has_it(scripted, tmp_path):
    """Against the scripted server (see module docstring): no sha256-<hex> tag is written, the
    listing is one GET /v2/<name>/referrers/<digest>, and a copy into another repository uses it
    too."""
    server, settings = scripted
    client = client_for(settings)
    digest = push_image(client, "ci/paddle")
    record = _record_for(settings, digest)
    (tmp_path / "junit.xml").write_bytes(JUNIT)
    (tmp_path / "smoke.log").write_bytes(LOG)
    att = registry_store.publish(settings, record, tmp_path)
    assert not any(_tag_index_request(line) for line in server.log)
    server.log.clear()
    verified = registry_store.check(settings, client, "ci/paddle", digest, "cpu")
    assert verified.location == att.location
    # the listing is one referrers GET; the .att tag is read on a thread meanwhile, so its GETs
    # may come first (they did, under load: a shuffled run)
    assert server.log.count(f"GET /v2/ci/paddle/referrers/{digest}") == 1, server.log
    assert not any("/tags/list" in line for line in server.log), server.log
    client.copy_image(client, "ci/paddle", digest, "release/paddle")
    registry_store.copy(client, client, "ci/paddle", "release/paddle", verified)
    assert registry_store.check(settings, client, "release/paddle", digest, "cpu").passed
    assert not any(_tag_index_request(line) for line in server.log)


def _tag_index_request(line: str) -> bool:
    """A request for the referrers tag schema (``sha256-<hex>`` or an own tag); cosign's
    ``sha256-<hex>.att`` tag is a layout of its own, written on every registry."""
    return "/manifests/sha256-" in line and not line.endswith(".att")


def test_registry_rejecting_the_artifact_is_named(scripted, tmp_path):
    server, settings = scripted
    client = client_for(settings)
    digest = push_image(client, "ci/paddle")
    server.reject_manifests = (
        "artifactType application/vnd.paddlecd.attestation.v1+json not allowed"
    )
    with pytest.raises(
        RegistryError, match="MANIFEST_INVALID: artifactType .* not allowed"
    ) as info:
        registry_store.publish(settings, _record_for(settings, digest), tmp_path)
    assert info.value.exit_code == 5 and info.value.hint
    assert referrers.referrers(client, "ci/paddle", digest) == []


def _record_for(settings, digest: str) -> dict:
    return {
        "digest": digest,
        "reference": f"{settings.candidate_repo}@{digest}",
        "variant": "cpu",
        "passed": True,
        "created": now_iso(),
        "checks": [
            {"name": f"{m}/t", "passed": True, "metrics": {}} for m in evidence.REQUIRED_CHECKS
        ],
    }


# ------------------------------------------------------------- one real verify (the smoke suite)


def test_real_verify_signs_and_another_machine_promotes(registry_env, paddle_image, tmp_path):
    """`invoke verify` runs the real smoke suite in the Paddle CPU image and pushes its attestation;
    a second state folder (another machine: no evidence, no candidate) promotes from it."""
    from paddlecd import engine

    p = Project(tmp_path)
    engine.tag(paddle_image, f"{p.settings.candidate_repo}:cpu-test")
    try:
        digest = engine.push(f"{p.settings.candidate_repo}:cpu-test")
        out = tmp_path / "verify-out"
        run = _invoke(
            p, "verify", "--image", f"{p.settings.candidate_repo}@{digest}", "--out", str(out)
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert f"attestation: {p.settings.candidate_repo}@sha256:" in run.stdout
        machine2 = p.with_state(tmp_path / "machine2")
        p.promote("1.0.0", settings=machine2, digest=digest)
        proof = registry_store.check(machine2, p.client, p.settings.release.repository, digest,
                                     "cpu")
        modules = {c["name"].split("/", 1)[0] for c in proof.predicate["checks"]}
        assert proof.passed and modules >= set(evidence.REQUIRED_CHECKS)
        signed = proof.predicate["byproducts"]["junit.xml"]["sha256"]
        assert signed == hashlib.sha256((out / "junit.xml").read_bytes()).hexdigest()
        assert (
            json.loads((out / registry_store.ENVELOPE_FILE).read_text())["payloadType"]
            == dsse.PAYLOAD_TYPE
        )
    finally:
        engine.remove_image(f"{p.settings.candidate_repo}:cpu-test")

"""Attestations in cosign's layouts, read by code paddlecd did not write, in the real registry.

The CNCF distribution 2.8 registry of the other integration tests (htpasswd over TLS, no referrers
API, so the ``sha256-<hex>`` fallback index). Readers: sigstore-js (``@sigstore/verify`` through
tests/support/sigstore_verify.cjs), Sigstore's bundle model (PyPI sigstore-models), and the
registry API read with ``requests`` and compared with what cosign's source expects
(shared/reference/formats.md; sigstore/cosign d6d86c22 ``pkg/oci/remote/write.go``
``WriteAttestationNewBundleFormat``, ``pkg/oci/internal/signature/layer.go``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from pathlib import Path

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from securesystemslib.signer import CryptoSigner
from sigstore_models.bundle.v1 import Bundle
from test_attestation import _invoke, _push_envelope, _record, _sign
from test_release import Project

from paddlecd.registry import cosign, referrers
from paddlecd.signing import bundle, keys
from paddlecd.verify import attestation, registry_store

from support import sigstore_js
from support.oci_images import push_image

AUTH = ("ci", "s3cret-Pa55")
CREATED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


@pytest.fixture
def project(registry_env, tmp_path) -> Project:
    return Project(tmp_path)


def _bundle_in(project: Project, repo: str, digest: str) -> bytes:
    [listed] = referrers.referrers(project.client, repo, digest, bundle.BUNDLE_TYPE)
    manifest = project.client.get_manifest(repo, listed.digest).json()
    return referrers.read_blob(project.client, repo, manifest["layers"][0]["digest"])


def _js(project: Project, raw: bytes, digest: str, tmp_path: Path) -> dict:
    return sigstore_js.verify(
        raw, hint=keys.trusted(project.settings)[0].keyid,
        public_key=Path(project.flags["release.trusted_keys"]), digest=digest,
        predicate_type=attestation.PREDICATE_TYPE, tmp=tmp_path)


def _tampered_payload(raw: bytes) -> bytes:
    doc = json.loads(raw)
    payload = base64.b64decode(doc["dsseEnvelope"]["payload"])
    changed = payload.replace(b'"busbw_gbps": 1.25', b'"busbw_gbps": 9.25', 1)
    assert changed != payload
    doc["dsseEnvelope"]["payload"] = base64.b64encode(changed).decode()
    return json.dumps(doc).encode()


# ------------------------------------------------------------------ independent readers


def test_sigstore_js_verifies_the_bundle_and_rejects_a_tampered_copy(project, tmp_path):
    sigstore_js.node_modules()  # fails under CI=true when the install step did not run
    digest = project.candidate()
    raw = _bundle_in(project, project.settings.registry.repository, digest)
    answer = _js(project, raw, digest, tmp_path)
    assert answer["ok"] and answer["subject"][0]["digest"] == {"sha256": digest[7:]}
    tampered = _js(project, _tampered_payload(raw), digest, tmp_path)
    assert not tampered["ok"] and "SIGNATURE_ERROR" in tampered["error"]
    other = _js(project, raw, "sha256:" + "0" * 64, tmp_path)  # the script's own subject check
    assert not other["ok"] and "no subject with sha256" in other["error"]
    # the release carries its own: the copy in the release repository verifies too
    project.promote("1.4.0", digest=digest)
    copied = _bundle_in(project, project.settings.release.repository, digest)
    assert copied == raw and _js(project, copied, digest, tmp_path)["ok"]


def test_sigstore_models_parses_every_bundle_strictly(project):
    digest = project.candidate()
    project.evidence(digest, passed=False)  # a second run: a second bundle
    repo = project.settings.registry.repository
    listed = referrers.referrers(project.client, repo, digest, bundle.BUNDLE_TYPE)
    assert len(listed) == 2
    for ref in listed:
        layer = project.client.get_manifest(repo, ref.digest).json()["layers"][0]
        parsed = Bundle.from_json(referrers.read_blob(project.client, repo, layer["digest"]))
        assert parsed.media_type == bundle.BUNDLE_TYPE and parsed.dsse_envelope is not None


def test_registry_api_shows_both_layouts_as_cosign_reads_them(project, registry):
    digest = project.candidate()
    repo, hexd = project.settings.registry.repository, digest[7:]

    def get(path: str) -> requests.Response:
        resp = requests.get(
            f"https://{project.settings.registry.url}/v2/{repo}/{path}", auth=AUTH,
            verify=registry.ca_file, timeout=30,
            headers={"Accept": "application/vnd.oci.image.index.v1+json, "
                               "application/vnd.oci.image.manifest.v1+json"})
        assert resp.status_code == 200, (path, resp.text)
        return resp

    # the referrers fallback index cosign reads where the registry has no referrers API
    index = get(f"manifests/sha256-{hexd}").json()
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    [entry] = [e for e in index["manifests"] if e["artifactType"] == bundle.BUNDLE_TYPE]
    want = {"dev.sigstore.bundle.content": "dsse-envelope",
            "dev.sigstore.bundle.predicateType": attestation.PREDICATE_TYPE}
    assert entry["annotations"].items() >= want.items()  # cosign#4641: kept in the index
    manifest = get(f"manifests/{entry['digest']}").json()
    assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert manifest["artifactType"] == bundle.BUNDLE_TYPE
    assert manifest["config"]["mediaType"] == "application/vnd.oci.empty.v1+json"
    assert manifest["config"]["digest"] == referrers.EMPTY_DIGEST
    assert [x["mediaType"] for x in manifest["layers"]] == [bundle.BUNDLE_TYPE]  # exactly one
    assert manifest["subject"]["digest"] == digest
    assert manifest["annotations"].items() >= want.items()
    assert CREATED.match(manifest["annotations"]["org.opencontainers.image.created"])
    held = get(f"blobs/{manifest['layers'][0]['digest']}").json()
    # the legacy tag: one layer per envelope, the two annotations cosign reads
    att = get(f"manifests/sha256-{hexd}.att").json()
    assert att["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    [layer] = att["layers"]
    assert layer["mediaType"] == "application/vnd.dsse.envelope.v1+json"
    assert layer["annotations"] == {"dev.cosignproject.cosign/signature": "",
                                    "predicateType": attestation.PREDICATE_TYPE}
    envelope = get(f"blobs/{layer['digest']}").json()
    assert envelope == held["dsseEnvelope"]  # one run, in both layouts
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    config = get(f"blobs/{att['config']['digest']}").json()
    assert att["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
    assert config["rootfs"] == {"type": "layers", "diff_ids": [layer["digest"]]}
    # the JUnit XML and smoke log: a referrer of their own, named by sha256 in the predicate
    [side] = [e for e in index["manifests"] if e["artifactType"] == registry_store.BYPRODUCTS_TYPE]
    titles = {x["annotations"]["org.opencontainers.image.title"]: x["digest"]
              for x in get(f"manifests/{side['digest']}").json()["layers"]}
    signed = json.loads(base64.b64decode(envelope["payload"]))["predicate"]["byproducts"]
    assert {k: f"sha256:{v['sha256']}" for k, v in signed.items()} == titles


# ------------------------------------------------------------------ layouts and old images


def test_a_run_in_both_layouts_is_one_run_and_promote_copies_each(project):
    digest = project.candidate()
    [run] = registry_store.runs(project.client, project.settings.registry.repository, digest,
                          keys.trusted(project.settings))
    assert run.layouts == ("Sigstore bundle referrer", "cosign .att tag",
                           "JUnit XML and smoke log")
    project.promote("1.4.0", digest=digest)
    release = project.settings.release.repository
    [copied] = registry_store.runs(project.client, release, digest, keys.trusted(project.settings))
    assert copied.layouts == run.layouts
    shown = _invoke(project, "release.show", "1.4.0-cpu")
    assert shown.returncode == 0, shown.stderr
    assert f"{project.settings.release_repo}:sha256-{digest[7:]}.att@sha256:" in shown.stdout
    assert "(Sigstore bundle referrer, run passed" in shown.stdout


@pytest.mark.parametrize("layouts", ["att", "bundle"])
def test_the_setting_chooses_the_layouts_written(registry_env, tmp_path, layouts):
    project = Project(tmp_path, **{"verify.attestation_layouts": layouts})
    digest = project.candidate()
    repo = project.settings.registry.repository
    bundles = referrers.referrers(project.client, repo, digest, bundle.BUNDLE_TYPE)
    tags = project.client.list_tags(repo)
    assert (len(bundles), cosign.att_tag(digest) in tags) == (
        (0, True) if layouts == "att" else (1, False))
    out = project.promote("1.4.0", digest=digest)
    assert out.plan.attestation.passed
    proof = registry_store.check(project.settings, project.client,
                           project.settings.release.repository, digest, "cpu")
    assert proof.passed and len(proof.stored) == 2  # the one layout and the JUnit/log referrer


def test_an_image_attested_in_the_paddlecd_v1_artifact_stays_promotable(project):
    """As verify wrote it before: the v1 artifact, signed under securesystemslib's key id."""
    digest = push_image(project.client, project.settings.registry.repository)
    pem = Path(project.flags["verify.signing_key"]).read_bytes()
    old = CryptoSigner(serialization.load_pem_private_key(pem, password=None))
    envelope = _sign(project, _record(project, digest), old)
    assert json.loads(envelope)["signatures"][0]["keyid"] == keys.trusted(
        project.settings)[0].legacy.keyid
    _push_envelope(project, digest, envelope)
    out = project.promote("1.4.0", digest=digest)
    assert out.plan.attestation.passed and out.attestation_copied["copied"] == 1
    release = project.settings.release.repository
    assert referrers.referrers(project.client, release, digest, registry_store.ARTIFACT_TYPE)
    shown = _invoke(project, "evidence.show", "1.4.0-cpu")
    assert shown.returncode == 0 and "(paddlecd v1 artifact)" in shown.stdout, shown.stderr


# ---------------------------------------------------------- bad input: refused, nothing written


def _push_bundle(project: Project, digest: str, raw: bytes) -> str:
    repo = project.settings.registry.repository
    pushed = referrers.push(
        project.client, repo, project.client.resolve(repo, digest),
        artifact_type=bundle.BUNDLE_TYPE,
        layers=[referrers.Layer(bundle.BUNDLE_TYPE, raw, "attestation.sigstore.json")],
        annotations=cosign.bundle_annotations(attestation.PREDICATE_TYPE, "2026-12-01T00:00:00Z"))
    return f"{project.settings.candidate_repo}@{pushed.digest}"


def _bad_bundle(project: Project, digest: str, kind: str) -> str:
    signer = CryptoSigner.generate_ecdsa() if kind == "untrusted hint" else None
    att = attestation.sign(_record(project, digest), signer or keys.signer(project.settings),
                           junit=b"", log=b"")
    doc = json.loads(bundle.to_bundle(att))
    sigs = doc["dsseEnvelope"]["signatures"]
    if kind == "two signatures":
        sigs.append(dict(sigs[0]))
    elif kind == "keyid differs":
        sigs[0]["keyid"] = hashlib.sha256(b"another key").hexdigest()
    return _push_bundle(project, digest, json.dumps(doc).encode())


def _two_layers(project: Project, digest: str) -> str:
    """A valid bundle with the JUnit XML as a second layer: cosign skips such a referrer."""
    repo = project.settings.registry.repository
    raw = bundle.to_bundle(attestation.sign(_record(project, digest), keys.signer(project.settings),
                                            junit=b"<testsuite/>", log=b""))
    pushed = referrers.push(
        project.client, repo, project.client.resolve(repo, digest),
        artifact_type=bundle.BUNDLE_TYPE,
        layers=[referrers.Layer(bundle.BUNDLE_TYPE, raw, "attestation.sigstore.json"),
                referrers.Layer(registry_store.JUNIT_TYPE, b"<testsuite/>", "junit.xml")],
        annotations=cosign.bundle_annotations(attestation.PREDICATE_TYPE, "2026-12-01T00:00:00Z"))
    return f"{project.settings.candidate_repo}@{pushed.digest}"


def _att_without_annotation(project: Project, digest: str) -> str:
    repo, client = project.settings.registry.repository, project.client
    envelope = _sign(project, _record(project, digest))
    blob = "sha256:" + hashlib.sha256(envelope).hexdigest()
    client.upload_blob(repo, blob, envelope, len(envelope))
    layer = {"mediaType": cosign.DSSE_TYPE, "digest": blob, "size": len(envelope),
             "annotations": {"predicateType": attestation.PREDICATE_TYPE}}
    cosign._put_att(client, repo, digest, [layer])
    return f"{project.settings.candidate_repo}:{cosign.att_tag(digest)}@sha256:"


@pytest.mark.parametrize("kind, words", [
    ("two signatures", "holds 2 signatures; a paddlecd attestation has exactly one"),
    ("untrusted hint", "names key [0-9a-f]+ \\(its publicKey hint\\), which is not in "
                       "release.trusted_keys"),
    ("keyid differs", "the signature's keyid '[0-9a-f]+' differs from the bundle's publicKey"),
    ("att annotation", "layer 0 of .* is no cosign attestation layer .*annotation "
                       "dev.cosignproject.cosign/signature missing"),
    ("two layers", "has 2 layers, not exactly one Sigstore bundle"),
])
def test_bad_input_is_one_typed_error_naming_it_and_nothing_is_written(project, kind, words):
    digest = push_image(project.client, project.settings.registry.repository)
    where = (_att_without_annotation(project, digest) if kind == "att annotation"
             else _two_layers(project, digest) if kind == "two layers"
             else _bad_bundle(project, digest, kind))
    run = _invoke(
        project, "promote", "--variant", "cpu", "--version", "1.4.0", "--digest", digest, "--yes"
    )
    assert run.returncode == 7, run.stderr
    [error] = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert re.search(words, error) and where in error, error
    assert "hint:" in run.stderr
    assert project.client.list_tags(project.settings.release.repository) == []
    shown = _invoke(project, "evidence.show", f"{project.settings.candidate_repo}@{digest}")
    assert "REJECTED:" in shown.stdout and where in shown.stdout, shown.stdout + shown.stderr


def test_concurrent_verify_runs_keep_every_run_in_both_layouts(project, tmp_path):
    """Four verify runs of one digest publishing at once. Every run is in the bundle layout (a
    referrer each, with its own tag). The .att tag is a read-modify-write that a writer which
    read it before another's PUT can drop an entry from (seen here); each write lists every run
    of the digest's bundle referrers, so the next run's write restores it."""
    digest = push_image(project.client, project.settings.registry.repository)
    barrier, errors = threading.Barrier(4), []

    def run(i: int) -> None:
        out = tmp_path / f"run-{i}"
        out.mkdir()
        (out / "junit.xml").write_text(f'<testsuite name="smoke-{i}"/>')
        (out / "smoke.log").write_text(f"run {i}\n")
        try:
            if i < 4:
                barrier.wait()
            registry_store.publish(project.settings, _record(project, digest, duration_s=i), out)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    repo = project.settings.registry.repository
    assert len(referrers.referrers(project.client, repo, digest, bundle.BUNDLE_TYPE)) == 4
    assert 1 <= len(cosign.read_att(project.client, repo, digest)[1]) <= 4
    run(4)  # the next verify run of the digest
    assert errors == []
    assert len(cosign.read_att(project.client, repo, digest)[1]) == 5
    found = registry_store.runs(project.client, repo, digest, keys.trusted(project.settings))
    assert len(found) == 5 and all(len(r.layouts) == 3 for r in found), [r.layouts for r in found]


def test_a_later_run_is_appended_to_the_release_att_tag(project):
    """The release repository's .att tag gains the newer run on the next promotion of the digest
    (the envelopes it holds already stay: merged, not replaced)."""
    digest = project.candidate()
    project.promote("1.4.0", digest=digest)
    release = project.settings.release.repository
    [first] = cosign.read_att(project.client, release, digest)[1]
    project.evidence(digest)  # verified again
    project.promote("1.5.0", digest=digest)
    layers = cosign.read_att(project.client, release, digest)[1]
    assert len(layers) == 2 and layers[0].data == first.data
    trusted = keys.trusted(project.settings)
    assert len(registry_store.runs(project.client, release, digest, trusted)) == 2

"""Build provenance (SLSA Provenance v1) as push attaches it, in the real registry: the referrer
as cosign's source expects it, verified by sigstore-js and parsed by Sigstore's bundle model,
copied by promote, shown by ``evidence.show``; one for another digest is refused by name.

The image is a small random one (tests/support/oci_images.py) and the build record a stand-in of
what ``build`` writes (the real build's provenance: tests/integration/test_build_push_verify.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from sigstore_models.bundle.v1 import Bundle
from test_attestation import _invoke
from test_release import Project

from paddlecd.image import provenance
from paddlecd.registry import cosign, referrers
from paddlecd.signing import bundle, keys
from paddlecd.verify import attestation

from support import sigstore_js
from support.oci_images import push_image

DOCKERFILE = Path(__file__).parents[2] / "images" / "Dockerfile"


@pytest.fixture
def project(registry_env, tmp_path) -> Project:
    return Project(tmp_path)


def _build(project: Project, digest: str) -> dict:
    base = f"{project.settings.registry.url}/paddlecd/base@sha256:{'ab' * 32}"
    return {"variant": "cpu", "tag": f"{project.settings.candidate_repo}:cpu-abc1234",
            "image_id": "sha256:" + "cd" * 32, "builder": "docker 20.10 with DOCKER_BUILDKIT=1",
            "started": "2026-12-01T00:00:00Z", "built": "2026-12-01T00:01:00Z", "base": base,
            "build_args": {"BASE": base, "PACKAGES": ""}, "secrets": ["ca_bundle"],
            "dockerfile": {"path": "images/Dockerfile",
                           "sha256": hashlib.sha256(DOCKERFILE.read_bytes()).hexdigest()},
            "revision": "f" * 40, "dirty": True, "source": "https://example.com/paddlecd"}


def _attached(project: Project) -> tuple[str, str, bytes]:
    """A candidate with passing evidence and push's provenance: (digest, location, bundle)."""
    digest = project.candidate()
    reference = f"{project.settings.candidate_repo}@{digest}"
    where = provenance.attach(project.settings, _build(project, digest), reference=reference,
                              digest=digest)
    return digest, where, _blob(project, project.settings.registry.repository, where)


def _blob(project: Project, repo: str, where: str) -> bytes:
    manifest = project.client.get_manifest(repo, where.rsplit("@", 1)[1]).json()
    return referrers.read_blob(project.client, repo, manifest["layers"][0]["digest"])


def _js(project: Project, raw: bytes, digest: str, tmp_path: Path) -> dict:
    return sigstore_js.verify(raw, hint=keys.trusted(project.settings)[0].keyid,
                              public_key=Path(project.flags["release.trusted_keys"]),
                              digest=digest, predicate_type=provenance.PREDICATE_TYPE, tmp=tmp_path)


def test_provenance_is_a_bundle_referrer_readers_verify_and_promote_copies(project, tmp_path):
    digest, where, raw = _attached(project)
    repo = project.settings.registry.repository
    [entry] = [r for r in referrers.referrers(project.client, repo, digest)
               if r.annotations.get(cosign.BUNDLE_PREDICATE) == provenance.PREDICATE_TYPE]
    assert entry.artifact_type == bundle.BUNDLE_TYPE  # in the sha256-<hex> index, annotated
    assert entry.annotations[cosign.BUNDLE_CONTENT] == "dsse-envelope"
    manifest = project.client.get_manifest(repo, entry.digest).json()
    assert [x["mediaType"] for x in manifest["layers"]] == [bundle.BUNDLE_TYPE]
    assert manifest["subject"]["digest"] == digest
    parsed = Bundle.from_json(raw)
    assert parsed.dsse_envelope is not None and parsed.media_type == bundle.BUNDLE_TYPE
    statement = json.loads(base64.b64decode(json.loads(raw)["dsseEnvelope"]["payload"]))
    build = statement["predicate"]["buildDefinition"]
    assert build["externalParameters"]["buildArgs"]["BASE"].endswith("@sha256:" + "ab" * 32)
    assert build["internalParameters"] == {"secrets": ["ca_bundle"]}  # ids only
    deps = {d.get("name", "source"): d for d in build["resolvedDependencies"]}
    assert deps["source"]["digest"] == {"gitCommit": "f" * 40}
    assert deps["source"]["annotations"] == {"dirty": True}
    assert deps["base"]["digest"] == {"sha256": "ab" * 32}
    run = statement["predicate"]["runDetails"]
    assert run["metadata"]["startedOn"] < run["metadata"]["finishedOn"]
    assert _js(project, raw, digest, tmp_path)["ok"]
    tampered = raw.replace(json.loads(raw)["dsseEnvelope"]["payload"][:40].encode(),
                           base64.b64encode(b'{"_type": "x", "predicate": {}}')[:40], 1)
    assert not _js(project, tampered, digest, tmp_path)["ok"]
    # the verify run lists it, so a promotion copies it along; the copy verifies the same
    out = project.promote("1.4.0", digest=digest)
    assert f"@{entry.digest}" in " ".join(out.plan.attestation.stored)
    release = project.settings.release.repository
    [copied] = provenance.find(project.client, release, digest, keys.trusted(project.settings))
    assert copied.problem is None and copied.predicate == statement["predicate"]
    assert _js(project, _blob(project, release, copied.location), digest, tmp_path)["ok"]
    assert where.rsplit("@", 1)[1] == copied.location.rsplit("@", 1)[1]


def test_evidence_show_shows_it_and_refuses_one_for_another_digest(project):
    digest, where, _ = _attached(project)
    shown = _invoke(project, "evidence.show", f"{project.settings.candidate_repo}@{digest}")
    assert shown.returncode == 0, shown.stderr
    assert f"provenance {where} (SLSA v1, verified)" in shown.stdout
    assert "  source:     git+https://example.com/paddlecd@" + "f" * 40 + " (dirty: yes)" \
        in shown.stdout
    assert "(SLSA provenance of the build)" in shown.stdout  # listed with the run: promote copies
    # a correctly signed provenance of another image, attached to this one
    other = push_image(project.client, project.settings.registry.repository)
    doc = provenance.statement(_build(project, other), digest=other,
                               reference=f"{project.settings.candidate_repo}@{other}")
    raw = bundle.to_bundle(attestation.sign_statement(doc, keys.signer(project.settings)))
    repo = project.settings.registry.repository
    wrong = referrers.push(
        project.client, repo, project.client.resolve(repo, digest),
        artifact_type=bundle.BUNDLE_TYPE,
        layers=[referrers.Layer(bundle.BUNDLE_TYPE, raw, provenance.PROVENANCE_FILE)],
        annotations=cosign.bundle_annotations(provenance.PREDICATE_TYPE, "2026-12-01T00:02:00Z"))
    refused = _invoke(project, "evidence.show", f"{project.settings.candidate_repo}@{digest}")
    assert refused.returncode == 7, refused.stdout + refused.stderr
    line = f"provenance {project.settings.registry.url}/{repo}@{wrong.digest}: REJECTED: "
    assert line in refused.stdout and f"is about {other}, not {digest}" in refused.stdout
    assert f"error: the provenance {project.settings.registry.url}/{repo}@{wrong.digest} of " \
        in refused.stderr and "\nhint: " in refused.stderr


def test_a_provenance_by_an_untrusted_key_beside_a_trusted_one_is_shown_not_fatal(project,
                                                                                tmp_path):
    """Trial 7: a second checkout's push (its own key pair) attached its provenance to the same
    digest, and the demo's own ``evidence.show <release>`` exited 7 for it, beside the trusted
    one. As cosign does with signatures: it is listed as REJECTED; one that verifies is enough.
    Alone, it is still a failed check."""
    keys.keygen(tmp_path / "other")
    stranger = keys.load_signer(tmp_path / "other" / keys.PRIVATE_NAME, "another checkout's key")
    repo = project.settings.registry.repository

    def attach_theirs(digest: str) -> str:
        doc = provenance.statement(_build(project, digest), digest=digest,
                                   reference=f"{project.settings.candidate_repo}@{digest}")
        raw = bundle.to_bundle(attestation.sign_statement(doc, stranger))
        return referrers.push(
            project.client, repo, project.client.resolve(repo, digest),
            artifact_type=bundle.BUNDLE_TYPE,
            layers=[referrers.Layer(bundle.BUNDLE_TYPE, raw, provenance.PROVENANCE_FILE)],
            annotations=cosign.bundle_annotations(provenance.PREDICATE_TYPE,
                                                  "2026-12-01T00:03:00Z")).digest

    digest, where, _ = _attached(project)
    theirs = attach_theirs(digest)
    shown = _invoke(project, "evidence.show", f"{project.settings.candidate_repo}@{digest}")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert f"provenance {where} (SLSA v1, verified)" in shown.stdout
    assert (f"provenance {project.settings.registry.url}/{repo}@{theirs}: REJECTED: "
            in shown.stdout and "which is not in release.trusted_keys" in shown.stdout)
    alone = project.candidate()  # verified, and no provenance but the stranger's
    attach_theirs(alone)
    refused = _invoke(project, "evidence.show", f"{project.settings.candidate_repo}@{alone}")
    assert refused.returncode == 7 and "which is not in release.trusted_keys" in refused.stderr


def test_a_push_with_the_trusted_key_attaches_its_own_beside_an_untrusted_one(project,
                                                                               tmp_path):
    """Trial 8: a push of one build with another key, then with the trusted one, reused the
    first provenance (exit 0, "provenance: <the untrusted one>"): none by the trusted key was
    ever attached, and evidence.show kept exiting 7. A provenance is this push's only when the
    same key signed it."""
    from paddlecd import config

    from support import ROOT

    digest = project.candidate()
    reference = f"{project.settings.candidate_repo}@{digest}"
    keys.keygen(tmp_path / "other")
    other = config.load({**project.flags,
                         "verify.signing_key": str(tmp_path / "other" / keys.PRIVATE_NAME)},
                        root=ROOT)
    theirs = provenance.attach(other, _build(project, digest), reference=reference, digest=digest)
    mine = provenance.attach(project.settings, _build(project, digest), reference=reference,
                             digest=digest)
    assert mine != theirs
    again = provenance.attach(project.settings, _build(project, digest), reference=reference,
                              digest=digest)
    assert again == mine  # the same key, the same build: found, not attached twice
    found = provenance.find(project.client, project.settings.registry.repository, digest,
                            keys.trusted(project.settings))
    assert [p.location for p in found if p.problem is None] == [mine]
    shown = _invoke(project, "evidence.show", reference)
    assert shown.returncode == 0, shown.stdout + shown.stderr


def test_a_verify_run_after_push_lists_only_verify_runs_in_the_att_tag(project):
    """A trial: verify after push appended push's provenance envelope to cosign's ``.att`` tag,
    under the verify predicate's ``predicateType`` annotation; evidence.show then printed a
    REJECTED run (still exit 0) and promote copied the mislabelled layer."""
    digest, _, _ = _attached(project)
    project.evidence(digest)  # the pipeline's order: push's provenance first, then verify
    _, layers = cosign.read_att(project.client, project.settings.registry.repository, digest)
    payloads = [json.loads(base64.b64decode(json.loads(x.data)["payload"])) for x in layers]
    assert len(payloads) == 2  # candidate()'s run and this one
    assert {p["predicateType"] for p in payloads} == {attestation.PREDICATE_TYPE}
    shown = _invoke(project, "evidence.show", f"{project.settings.candidate_repo}@{digest}")
    assert shown.returncode == 0 and "REJECTED" not in shown.stdout, shown.stdout + shown.stderr


def test_pushing_the_same_build_again_attaches_no_second_provenance(project):
    """A trial: each re-push of an unchanged build added another signed provenance referrer
    (four pushes, four referrers, all copied by promote)."""
    digest, where, _ = _attached(project)
    build = _build(project, digest)
    again = provenance.attach(project.settings, build, digest=digest,
                              reference=f"{project.settings.candidate_repo}@{digest}")
    assert again == where
    listed = [r for r in referrers.referrers(project.client, project.settings.registry.repository,
                                             digest)
              if r.annotations.get(cosign.BUNDLE_PREDICATE) == provenance.PREDICATE_TYPE]
    assert len(listed) == 1


def test_evidence_show_before_verify_shows_the_provenance_push_attached(project):
    """A trial (issue 21): before verify, evidence.show said only "no attestation", though push
    had attached the build's signed provenance. It is shown, and the exit stays 7."""
    digest = push_image(project.client, project.settings.registry.repository, "unverified")
    reference = f"{project.settings.candidate_repo}@{digest}"
    where = provenance.attach(project.settings, _build(project, digest), reference=reference,
                              digest=digest)
    shown = _invoke(project, "evidence.show", reference)
    assert shown.returncode == 7, shown.stdout + shown.stderr
    assert f"provenance {where} (SLSA v1, verified)" in shown.stdout
    assert f"error: no attestation of {reference} (its build provenance is shown above)" \
        in shown.stderr

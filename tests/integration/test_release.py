"""Promotion, rollback and the ledger against a real distribution registry (htpasswd auth over TLS).

Images are uploaded with paddlecd's own client (tests/integration/oci_images.py); evidence and
candidate records are written with paddlecd.verify.evidence exactly as verify/push write them, and
the evidence is signed and attached to the digest with paddlecd.verify.registry_store.publish as
verify does (each Project has its own key pair, trusted through release.trusted_keys).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import threading
import uuid
from pathlib import Path

import pytest

from paddlecd import config
from paddlecd.errors import ConfigError, PromotionError
from paddlecd.image import candidate
from paddlecd.registry.client import OCI_INDEX, client_for
from paddlecd.registry.embedded import RegistryServer, free_port
from paddlecd.release import ledger
from paddlecd.release import promote as release
from paddlecd.signing import keys
from paddlecd.verify import evidence, registry_store

from support import ROOT
from support.oci_images import push_image


class Project:
    """Settings for one test: unique candidate and release repositories, own state folder."""

    def __init__(self, tmp_path: Path, *, same_repo: bool = False, **flags):
        uid = uuid.uuid4().hex[:8]
        private, public = keys.keygen(tmp_path / f"keys-{uid}")
        self.flags = {
            "state_dir": str(tmp_path / "state"),
            "registry.repository": f"ci/paddle-{uid}",
            "release.repository": f"ci/paddle-{uid}" if same_repo else f"release/paddle-{uid}",
            "verify.signing_key": str(private),
            "release.trusted_keys": str(public),
            **flags,
        }
        self.out = tmp_path / f"verify-{uid}"
        self.settings = config.load(self.flags, root=ROOT)
        self.client = client_for(self.settings)

    def env(self) -> dict[str, str]:
        """``PADDLECD_*`` variables for running `invoke` on this project (repos, state, keys)."""
        return {"PADDLECD_STATE_DIR": self.flags["state_dir"],
                "PADDLECD_REGISTRY_REPOSITORY": self.flags["registry.repository"],
                "PADDLECD_RELEASE_REPOSITORY": self.flags["release.repository"],
                "PADDLECD_VERIFY_SIGNING_KEY": self.flags["verify.signing_key"],
                "PADDLECD_RELEASE_TRUSTED_KEYS": self.flags["release.trusted_keys"]}

    def with_state(self, state: Path) -> config.Settings:
        return config.load({**self.flags, "state_dir": str(state)}, root=ROOT)

    def candidate(self, variant: str = "cpu", *, passed: bool = True, age_hours: float = 0,
                  settings: config.Settings | None = None, figures: str | None = None) -> str:
        """Push a fresh image as the variant's candidate, with evidence (and the ``figures`` of a
        recorded run, tests/data/gates/<figures>); return its digest."""
        s = settings or self.settings
        digest = push_image(self.client, s.registry.repository, f"{variant}-{uuid.uuid4().hex[:7]}")
        reference = f"{s.candidate_repo}@{digest}"
        candidate.save_candidate(s, variant, reference=reference, digest=digest, tag="cpu-test")
        self.evidence(digest, variant, passed=passed, age_hours=age_hours, settings=s,
                      figures=figures)
        return digest

    def evidence(self, digest, variant="cpu", *, passed=True, age_hours=0.0, settings=None,
                 modules=evidence.REQUIRED_CHECKS, attest=True, figures=None):
        """Save evidence as verify does and (``attest``) sign and push its attestation."""
        created = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=age_hours)
        checks = [evidence.Check(name=f"{m}/test_{m}", passed=True, duration_s=0.1)
                  for m in ("environment", "convergence", "export") if m in modules]
        checks.append(evidence.Check(name="allreduce/test_allreduce_exact_sums", passed=passed,
                                     duration_s=1.0, metrics={"busbw_gbps": 1.25}))
        record = evidence.Evidence(
            digest=digest, reference=f"{self.settings.candidate_repo}@{digest}", variant=variant,
            passed=passed, created=created.isoformat().replace("+00:00", "Z"),
            versions={"paddle": "3.0.0"}, checks=tuple(checks))
        if figures:  # a real run's figures (tests/data/gates)
            run = json.loads((ROOT / "tests" / "data" / "gates" / figures).read_text())
            record = dataclasses.replace(record, hardware=run["hardware"],
                                         figures=tuple(run["figures"]))
        evidence.save(settings or self.settings, record)
        return self.attest(record, settings=settings) if attest else None

    def attest(self, record, *, settings=None):
        """Sign and push the attestation of ``record`` (an Evidence, or a raw mapping)."""
        self.out.mkdir(exist_ok=True)
        (self.out / "junit.xml").write_text('<testsuite name="smoke"/>')
        (self.out / "smoke.log").write_text("smoke log\n")
        return registry_store.publish(settings or self.settings, record, self.out)

    def promote(self, version=None, *, settings=None, **kw):
        return release.promote(
            settings or self.settings,
            variant=kw.pop("variant", "cpu"),
            version=version,
            execute=kw.pop("execute", True),
            **kw,
        )

    def promote_at_once(self, versions, states) -> list[BaseException]:
        """Promote ``versions[i]`` with ``states[i]`` in threads released together (separate state
        folders, no shared lock file, as on several runners); the errors they raised."""
        barrier, errors = threading.Barrier(len(versions)), []

        def run(version, settings):
            try:
                barrier.wait()
                self.promote(version, settings=settings)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=run, args=vs) for vs in zip(versions, states)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return errors

    def tag(self, tag: str) -> str | None:
        from paddlecd.release.plan import current
        return current(self.client, self.settings.release.repository, tag)

    def records(self) -> list[ledger.Record]:
        return release.history(self.settings)


@pytest.fixture
def project(registry_env, tmp_path) -> Project:
    return Project(tmp_path)


def _blobs(registry) -> set[str]:
    root = Path(registry.root) / "data" / "docker" / "registry" / "v2" / "blobs"
    return {p.name for p in root.glob("sha256/*/*")}


def _blob(registry, hexdigest: str) -> dict:
    root = Path(registry.root) / "data" / "docker" / "registry" / "v2" / "blobs"
    return json.loads((root / "sha256" / hexdigest[:2] / hexdigest / "data").read_bytes())


def test_promote_to_another_repository_mounts_blobs(project, registry):
    digest = project.candidate()
    blobs_before = _blobs(registry)
    out = project.promote("1.4.0")
    assert out.copied == {"mounted": 3, "copied": 1}  # config + 2 layers mounted; the manifest PUT
    assert out.bytes_uploaded == 0
    for tag in ("1.4.0-cpu", "1.4-cpu", "1-cpu", "latest-cpu"):
        assert project.tag(tag) == digest
    [record] = project.records()
    # the registry's storage grew by the ledger record (its JSON and its manifest) and the
    # release repository's referrers index (written per referrer copied), nothing else
    record_blob = hashlib.sha256(record.to_json()).hexdigest()
    record_manifest = project.tag(record.id).split(":")[1]
    grown = _blobs(registry) - blobs_before
    assert grown >= {record_blob, record_manifest}
    assert all(_blob(registry, b)["mediaType"] == OCI_INDEX
               for b in grown - {record_blob, record_manifest}), grown
    assert (record.action, record.version, record.digest, record.forced) == (
        "promote",
        "1.4.0",
        digest,
        False,
    )
    assert record.evidence.startswith(digest) and record.evidence_summary["passed"] is True
    # the attestation came along, every layout: the bundle referrer (bundle), the .att tag
    # (envelope, config) and the JUnit/log referrer (empty config, two files) mounted, the empty
    # config once for both referrers (then present), their three manifests written
    assert out.attestation_copied == {"mounted": 6, "present": 1, "copied": 3}
    proof = registry_store.check(project.settings, project.client,
                                 project.settings.release.repository, digest, "cpu")
    assert record.attestation == proof.location.rsplit("@", 1)[1]
    assert [name for name, _ in out.phases] == [
        "plan",
        "check evidence",
        "copy",
        "write ledger",
        "write tags",
        "verify digests",
    ]


def test_promote_within_one_repository(registry_env, tmp_path):
    p = Project(tmp_path, same_repo=True)
    digest = p.candidate()
    out = p.promote("0.1.0")
    assert out.copied == {"present": 1} and out.bytes_uploaded == 0
    assert p.tag("0.1.0-cpu") == p.tag("latest-cpu") == digest


def test_rerun_is_a_noop(project):
    project.candidate()
    project.promote("1.4.0")
    again = project.promote("1.4.0")
    assert again.plan.noop and again.written == [] and len(project.records()) == 1
    assert [name for name, _ in again.phases] == ["plan"]


def test_dry_run_writes_nothing(project):
    project.candidate()
    lines: list[str] = []
    out = project.promote("1.4.0", execute=False, report=lines.append)
    assert [w.tag for w in out.plan.writes] == ["1.4.0-cpu", "1.4-cpu", "1-cpu", "latest-cpu"]
    assert any("write immutable" in line for line in lines)
    assert project.tag("1.4.0-cpu") is None and project.records() == []


def test_a_plan_for_a_digest_released_before_says_so(project):
    """Trial 9: a rebuild byte-identical to release 0.1.0 was planned as "release 1.0.0; new" with
    no word that the digest is released already (allowed: a second name, not a new image)."""
    digest = project.candidate()
    project.promote("1.4.0")
    lines: list[str] = []
    out = project.promote("1.5.0", execute=False, report=lines.append)
    assert out.plan.also == ("1.4.0",)
    assert f"  note            {digest} is already release 1.4.0-cpu" in lines
    first: list[str] = []
    project.promote("2.0.0", execute=False, report=first.append, digest=project.candidate())
    assert not any("is already release" in x for x in first), first


def test_clobber_refused(project):
    first = project.candidate()
    project.promote("1.4.0")
    project.candidate()
    with pytest.raises(PromotionError, match="1.4.0-cpu exists on .*immutable") as info:
        project.promote("1.4.0")
    assert "phase 'plan'" in info.value.cause and "--bump" in info.value.hint
    assert project.tag("1.4.0-cpu") == project.tag("latest-cpu") == first
    assert len(project.records()) == 1


def test_prerelease_gets_only_its_own_tag(project):
    final = project.candidate()
    project.promote("1.4.0")
    rc = project.candidate()
    out = project.promote("1.5.0-rc.1")
    assert [w.tag for w in out.plan.writes] == ["1.5.0-rc.1-cpu"]
    assert project.tag("1.5.0-rc.1-cpu") == rc
    assert project.tag("latest-cpu") == project.tag("1-cpu") == final
    assert project.tag("1.5-cpu") is None
    assert release.find(project.settings, "1.5.0-rc.1-cpu").digest == rc
    [(record, tags, _)] = release.show(project.settings, "1.5.0-rc.1")
    assert record.digest == rc and tags == []


def test_out_of_order_promotions_end_on_highest(project):
    d = {}
    for version in ("1.10.0", "1.9.0", "1.4.2", "1.9.1"):
        d[version] = project.candidate()
        project.promote(version)
    assert (
        project.tag("latest-cpu") == project.tag("1-cpu") == project.tag("1.10-cpu") == d["1.10.0"]
    )
    assert project.tag("1.9-cpu") == d["1.9.1"] and project.tag("1.4-cpu") == d["1.4.2"]


def test_bump_from_highest_release(project):
    project.candidate()
    project.promote("1.9.0")
    project.candidate()
    assert project.promote(part="minor").plan.version == "1.10.0"


def test_rollback_and_forward_again(project):
    old = project.candidate()
    project.promote("1.3.2")
    new = project.candidate()
    project.promote("1.4.0")
    out = release.rollback(project.settings, variant="cpu", to="1.3.2", execute=True)
    assert sorted(out.written) == ["1-cpu", "latest-cpu"]
    assert project.tag("latest-cpu") == project.tag("1-cpu") == old
    assert project.tag("1.4-cpu") == project.tag("1.4.0-cpu") == new
    record = project.records()[-1]
    assert record.action == "rollback" and record.previous["latest-cpu"] == f"1.4.0@{new}"
    assert release.rollback(project.settings, variant="cpu", to="1.3.2", execute=True).plan.noop
    newest = project.candidate()
    project.promote("1.3.3")
    assert project.tag("latest-cpu") == newest


def test_rollback_to_unknown_release_refused(project):
    project.candidate()
    project.promote("1.4.0")
    with pytest.raises(PromotionError, match="no release 1.3.0-cpu"):
        release.rollback(project.settings, variant="cpu", to="1.3.0", execute=True)


@pytest.mark.parametrize("kind, words", [
    ("missing", "no attestation of"), ("failed", "run .* failed: allreduce"),
    ("stale", "is stale: 2"), ("incomplete", "lacks the export checks"),
    # a signed predicate checked by type (issue 12): both promoted before
    ("string", "newer run .* failed .*: allreduce"),
    ("contradiction", "newer run .* failed .*: allreduce"),
])
def test_evidence_refusals(project, kind, words):
    """Promotion reads the attestations in the registry: a local evidence file never counts."""
    digest = project.candidate(passed=kind != "failed", age_hours=200 if kind == "stale" else 0)
    if kind in ("missing", "incomplete"):  # a fresh digest: no attestation, or one of a partial run
        digest = push_image(project.client, project.settings.registry.repository)
        modules = evidence.REQUIRED_CHECKS[:3] if kind == "incomplete" else evidence.REQUIRED_CHECKS
        project.evidence(digest, modules=modules, attest=kind == "incomplete")
        assert evidence.load(project.settings, digest).passed is True
    if kind in ("string", "contradiction"):  # a later run signed with a check that is no pass
        raw = evidence.load(project.settings, digest).to_json()
        raw["checks"][3]["passed"] = "false" if kind == "string" else False
        later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=5)
        raw["created"] = later.isoformat().replace("+00:00", "Z")  # the newest run decides
        assert raw["passed"] is True and raw["checks"][3]["name"].startswith("allreduce/")
        project.attest(raw)
    with pytest.raises(PromotionError, match=f"phase 'check evidence' failed: refused: .*{words}"):
        project.promote("1.4.0", digest=digest)
    assert project.tag("1.4.0-cpu") is None and project.records() == []


def test_force_needs_a_reason_and_is_recorded(project):
    digest = project.candidate(passed=False)
    with pytest.raises(ConfigError, match="--force needs --reason"):
        project.promote("1.4.0", force=True)
    project.promote("1.4.0", force=True, reason="GPU runner down; verified by hand")
    [record] = project.records()
    assert record.forced and record.reason == "GPU runner down; verified by hand"
    assert project.tag("1.4.0-cpu") == digest
    # trial 9: --force over passing evidence planned a "forced" record of an override of nothing
    passing = project.candidate()
    with pytest.raises(ConfigError, match=f"--force: the evidence of {passing} passes"):
        project.promote("1.5.0", force=True, reason="habit", execute=False)
    assert project.tag("1.5.0-cpu") is None and len(project.records()) == 1


def test_interrupted_promotion_converges_on_rerun(project):
    digest = project.candidate()

    def crash_after_first_tag(line: str) -> None:
        if line.startswith("wrote "):
            raise RuntimeError("simulated crash")

    with pytest.raises(
        PromotionError, match="phase 'write tags' failed: RuntimeError: simulated crash"
    ):
        project.promote("1.4.0", report=crash_after_first_tag)
    assert project.tag("1.4.0-cpu") == digest and project.tag("latest-cpu") is None
    out = project.promote("1.4.0")
    assert out.plan.record is None  # the first run's record stands; no duplicate
    assert out.written == ["1.4-cpu", "1-cpu", "latest-cpu"]
    assert all(project.tag(t) == digest for t in ("1.4.0-cpu", "1.4-cpu", "1-cpu", "latest-cpu"))
    assert len(project.records()) == 1


def _killed_after_its_record(project, version: str) -> str:
    """Promote ``version`` of a fresh candidate, stopped right after its ledger record (a kill
    there: the record and the head are written, no tag); its digest."""
    digest = project.candidate()

    def kill_after_record(line: str) -> None:
        if line.startswith("ledger record "):
            raise RuntimeError("simulated kill")

    with pytest.raises(PromotionError, match="phase 'write ledger' failed: RuntimeError"):
        project.promote(version, report=kill_after_record)
    assert project.tag(f"{version}-cpu") is None
    return digest


def test_a_promotion_killed_after_its_record_is_completed_by_the_next_one_or_repair(project):
    """A trial (issue 21): a promotion killed right after its ledger record left its release
    recorded with every tag "(missing)", and a promotion of another version did not complete it
    (only the same promotion did). The next promotion of the variant completes the newest record;
    release.repair completes every one."""
    first = _killed_after_its_record(project, "1.4.0")
    out = project.promote("1.5.0")
    completing = [w.tag for w in out.plan.writes if w.completes]
    assert completing == ["1.4.0-cpu", "1.4-cpu"]  # 1-cpu, latest-cpu: 1.5.0's now (higher)
    assert "completes a promotion killed after its ledger record" in "\n".join(
        out.plan.describe())
    assert project.tag("1.4.0-cpu") == project.tag("1.4-cpu") == first
    second = _killed_after_its_record(project, "2.0.0")
    planned = release.repair(project.settings, variant="cpu")
    assert sorted(t for t, _, _ in planned.writes) == ["2-cpu", "2.0-cpu", "2.0.0-cpu",
                                                       "latest-cpu"]
    assert project.tag("2.0.0-cpu") is None  # not executed: nothing written
    done = release.repair(project.settings, variant="cpu", execute=True)
    assert done.writes == planned.writes and done.lost == ()
    assert all(project.tag(t) == second for t in ("2.0.0-cpu", "2.0-cpu", "2-cpu", "latest-cpu"))
    assert release.repair(project.settings, variant="cpu").writes == ()


def test_a_ledger_that_shows_no_record_after_the_write_is_named_not_a_concurrent_claim(
        project, monkeypatch):
    """Trial 13: a registry whose tag list did not show the promotion's own record (or that
    dropped it) had promote say "1.0.0-cpu was claimed first by None" / "a concurrent promotion
    took this version". The record's write is skipped here (this client's), the registry real;
    the re-run without the fault completes the promotion."""
    project.candidate()
    with monkeypatch.context() as fault, pytest.raises(PromotionError) as e:
        fault.setattr(ledger, "append", lambda *a, **k: None)
        project.promote("1.4.0")
    assert "shows no record of 1.4.0-cpu after this promotion wrote one" in e.value.cause
    assert "None" not in e.value.cause and "concurrent" not in e.value.hint
    assert project.promote("1.4.0").plan.version == "1.4.0"
    assert [r.version for r in project.records()] == ["1.4.0"]


def test_a_repair_the_registry_does_not_keep_is_not_called_done(project, monkeypatch):
    """Trial 13: a registry (a cache in front of it) that answered 201 to the repair's tag
    writes and kept the old tags had release.repair say "repaired". The writes are read back
    under the lock. The forgetting is this client's (its PUTs of moving tags skipped); the
    registry is the real one."""
    from paddlecd.errors import RegistryError
    from paddlecd.registry.client import Descriptor, RegistryClient

    _killed_after_its_record(project, "1.4.0")
    second = _killed_after_its_record(project, "2.0.0")
    real = RegistryClient.put_manifest

    def forgetful(self, repository, reference, raw, media_type):
        if reference in ("latest-cpu", "2-cpu"):  # 201, nothing kept
            import hashlib
            return Descriptor("sha256:" + hashlib.sha256(raw).hexdigest(), media_type, len(raw))
        return real(self, repository, reference, raw, media_type)

    monkeypatch.setattr(RegistryClient, "put_manifest", forgetful)
    with pytest.raises(RegistryError, match="answered 201 for .* but still serves another "
                                            "digest there"):
        release.repair(project.settings, variant="cpu", execute=True)
    monkeypatch.setattr(RegistryClient, "put_manifest", real)
    assert release.repair(project.settings, variant="cpu", execute=True).writes  # completes
    assert project.tag("latest-cpu") == second


def test_concurrent_promotions_keep_every_record_and_end_on_highest(project, tmp_path):
    """Two promoters with separate state folders (no shared lock file, as on two runners)."""
    states = [project.with_state(tmp_path / f"runner{i}") for i in range(2)]
    digests = {v: project.candidate(settings=s) for v, s in zip(("1.4.0", "1.5.0"), states)}
    errors = project.promote_at_once(list(digests), states)
    assert errors == []
    assert sorted(r.version for r in project.records()) == ["1.4.0", "1.5.0"]
    assert project.tag("latest-cpu") == project.tag("1-cpu") == digests["1.5.0"]
    assert project.tag("1.4-cpu") == digests["1.4.0"] and project.tag("1.5-cpu") == digests["1.5.0"]


def test_concurrent_claims_of_one_version_leave_one_winner(project, tmp_path):
    """Two runners promote different digests as 1.4.0 at once: one wins, the tags all agree with
    it."""
    states = [project.with_state(tmp_path / f"runner{i}") for i in range(2)]
    digests = [project.candidate(settings=s) for s in states]
    results: list[object] = [None, None]
    barrier = threading.Barrier(2)

    def run(i):
        try:
            barrier.wait()
            results[i] = project.promote("1.4.0", settings=states[i]).plan.digest
        except PromotionError as e:
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [r for r in results if isinstance(r, str)]
    assert len(winners) == 1, results
    assert all(project.tag(t) == winners[0] for t in ("1.4.0-cpu", "1.4-cpu", "latest-cpu"))
    [(record, _)] = release.list_releases(project.settings, "cpu")
    assert record.digest == winners[0] and set(digests) >= {winners[0]}


@pytest.mark.parametrize("version", ["v1.4", "1.4", "01.2.3"])
def test_invalid_version_writes_nothing(project, version):
    project.candidate()
    with pytest.raises(ConfigError, match="invalid version"):
        project.promote(version)
    assert project.client.list_tags(project.settings.release.repository) == []


def test_unknown_variant(project):
    with pytest.raises(ConfigError, match="unknown variant 'cu999'"):
        project.promote("1.4.0", variant="cu999")


def test_digest_not_in_repository(project):
    project.candidate()
    with pytest.raises(PromotionError, match="is not in"):
        project.promote("1.4.0", digest="sha256:" + "0" * 64)


def test_tag_instead_of_digest(project):
    digest = project.candidate()
    project.client.put_manifest(
        project.settings.registry.repository,
        "cpu-moved",
        project.client.get_manifest(project.settings.registry.repository, digest).raw,
        "application/vnd.oci.image.manifest.v1+json",
    )
    with pytest.raises(ConfigError, match="'cpu-moved' is a tag, not a digest") as info:
        project.promote("1.4.0", digest="cpu-moved")
    assert digest in info.value.hint


def test_find_list_show(project):
    digest = project.candidate()
    project.promote("1.4.0")
    found = release.find(project.settings, "1.4.0-cpu")
    assert (found.version, found.variant, found.digest) == ("1.4.0", "cpu", digest)
    assert found.reference == f"{project.settings.release_repo}@{digest}"
    with pytest.raises(ConfigError, match="moving tag"):
        release.find(project.settings, "latest-cpu")
    with pytest.raises(ConfigError, match="unknown release 9.9.9-cpu"):
        release.find(project.settings, "9.9.9-cpu")
    [(record, tags)] = release.list_releases(project.settings, "cpu")
    assert record.digest == digest and tags == ["1-cpu", "1.4-cpu", "latest-cpu"]
    [(record, tags, hist)] = release.show(project.settings, "1.4.0-cpu")
    assert record.version == "1.4.0" and len(hist) == 1


def test_show_lists_the_moving_tags_that_name_the_release_in_the_registry(project):
    """release.show X.Y.Z lists a moving tag under the release whose digest it names now: after
    0.1.0, 0.1.1 and 0.2.0 (another demo's releases in one registry, a new commit's minor),
    0.1.1 keeps only 0.1-cpu, since 0-cpu and latest-cpu name 0.2.0's digest; a rollback to
    0.1.1 re-points them and show follows the registry."""
    digests = {}
    for version in ("0.1.0", "0.1.1", "0.2.0"):
        digests[version] = project.candidate()
        project.promote(version)

    def shown(version: str) -> list[str]:
        [(record, tags, _)] = release.show(project.settings, version)
        assert record.digest == digests[version]
        return tags

    assert project.tag("0-cpu") == project.tag("latest-cpu") == digests["0.2.0"]
    assert (shown("0.1.0"), shown("0.1.1")) == ([], ["0.1-cpu"])
    assert shown("0.2.0") == ["0-cpu", "0.2-cpu", "latest-cpu"]
    release.rollback(project.settings, variant="cpu", to="0.1.1", execute=True)
    assert project.tag("latest-cpu") == digests["0.1.1"]
    assert shown("0.1.1") == ["0-cpu", "0.1-cpu", "latest-cpu"]
    assert shown("0.2.0") == ["0.2-cpu"]


def test_promote_to_another_registry_copies_only_missing_blobs(registry_env, tmp_path):
    other = RegistryServer(tmp_path / "other", port=free_port()).start()
    try:
        p = Project(tmp_path, **{"release.registry": other.host})
        digest = p.candidate()
        out = p.promote("2.0.0")
        assert out.copied == {"copied": 4} and out.bytes_uploaded > 0
        # bundle referrer 3 (empty config, bundle, manifest), .att 3 (envelope, config,
        # manifest), JUnit/log referrer 4 (the empty config unless the bundle's copy had it)
        copied = out.attestation_copied
        assert copied["copied"] + copied["present"] == 10 and copied["present"] <= 1, copied
        target = client_for(p.settings, other.host)
        assert registry_store.check(p.settings, target, p.settings.release.repository, digest,
                              "cpu").passed
        assert target.resolve(p.settings.release.repository, "latest-cpu").digest == digest
        assert release.find(p.settings, "2.0.0-cpu").reference.startswith(other.host)
    finally:
        other.stop()


def test_upgrade_gate_refuses_a_slower_candidate_by_name_and_accepts_with_a_reason(project):
    """The first release has no baseline and says so; a candidate whose training steps sleep
    2 ms (recorded from the CPU image run with SMOKE_STEP_SLEEP_S=0.002) is refused naming the
    figure; --accept-regression promotes it and the ledger keeps why and who."""
    first = project.candidate(figures="cpu-3.0.0.json")
    lines: list[str] = []
    project.promote("1.0.0", report=lines.append)
    assert any("not compared (no baseline: neither 1.0-cpu nor latest-cpu names a release)"
               in x for x in lines)
    assert project.records()[-1].gate["status"] == "not compared"
    slow = project.candidate(figures="cpu-3.0.0-step-sleep-2ms.json")
    with pytest.raises(PromotionError) as refused:
        project.promote("1.0.1")
    for word in ("train.step_time", "slower than 1.0.0-cpu", first, slow, "cores)"):
        assert word in refused.value.cause
    assert project.tag("1.0-cpu") == first  # nothing moved
    outcome = project.promote("1.0.1", accept_regression="sleeping steps, on purpose")
    assert project.tag("1.0-cpu") == slow
    gate = project.records()[-1].gate
    assert (gate["status"], gate["reason"], gate["baseline"]) == (
        "accepted", "sleeping steps, on purpose", "1.0.0-cpu")
    assert gate["who"] and "train.step_time" in {v["name"] for v in gate["verdicts"]
                                                if v["status"] == "regression"}
    assert release.released(outcome, executed=True).comparison["status"] == "accepted"
    # release.compare: both releases side by side, and the figures of the variant's history
    # (drawn as a PNG in tests/unit/test_release_gates.py: matplotlib costs seconds)
    from paddlecd.release import compare

    a, b = compare.side(project.settings, "1.0.0-cpu"), compare.side(project.settings, "1.0.1-cpu")
    assert a.hardware == b.hardware and a.reference.endswith(first)
    step = next(r for r in compare.rows(a, b) if r.name == "train.step_time")
    assert step.ratio > 3  # 2 ms of sleep on a ~0.8 ms step
    assert any(line.startswith("train.step_time") for line in compare.table(a, b))
    drawn = compare.series(compare.history(project.settings, "cpu"))
    values = [next(f.value for f in x.figures if f.name == "train.step_time") for x in (a, b)]
    assert drawn["train.step_time"]["points"] == [["1.0.0", values[0]], ["1.0.1", values[1]]]


def test_a_bump_killed_after_its_record_is_completed_by_its_rerun_not_bumped_again(project):
    """Trial 9: ``promote --bump patch --digest D`` killed during its tag writes, re-run, made a
    second release (1.7.2) of the digest beside the unfinished 1.7.1. The re-run completes the
    release the newest record promoted for that digest."""
    project.candidate()
    project.promote("1.7.0")
    digest = project.candidate()

    def kill_after_record(line: str) -> None:
        if line.startswith("ledger record "):
            raise RuntimeError("simulated kill")

    with pytest.raises(PromotionError, match="phase 'write ledger' failed"):
        project.promote(None, part="patch", digest=digest, report=kill_after_record)
    out = project.promote(None, part="patch", digest=digest)
    assert out.plan.version == "1.7.1" and out.plan.record is None
    assert project.tag("1.7.1-cpu") == digest and project.tag("1.7.2-cpu") is None
    assert [r.version for r in project.records()] == ["1.7.0", "1.7.1"]
    again = project.promote(None, part="patch", digest=digest)
    assert again.plan.noop and again.plan.version == "1.7.1"

"""Retention (release.prune) against a real distribution registry with deletes enabled.

Candidates are tiny synthetic OCI images (support/oci_images.py) with a ``created`` time, each
with what verify and push attach (the signed attestation with its JUnit referrer, the ``.att``
tag, a signed SLSA provenance); releases are made by the real promotion and rollback. skopeo, an
independent client, pulls every release by digest after the prune and after garbage collection.
The registry is this module's own (plain HTTP on loopback, as the embedded one), so
``scripts/stack.sh gc`` and a killed prune touch no other test's registry.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from paddlecd import config
from paddlecd.errors import RegistryError
from paddlecd.image import provenance as image_provenance
from paddlecd.registry import referrers
from paddlecd.registry.client import client_for
from paddlecd.registry.embedded import RegistryServer, free_port
from paddlecd.release import ledger, prune
from paddlecd.release import promote as release
from paddlecd.signing import keys
from paddlecd.verify import evidence, registry_store

from support import ROOT, invoke
from support.cli import clean_env
from support.oci_images import push_image

NOW = dt.datetime.now(dt.timezone.utc)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """This module's registry, laid out as scripts/stack.sh's (``<state>/registry``)."""
    state = tmp_path_factory.mktemp("prune-state")
    srv = RegistryServer(state / "registry", port=free_port()).start()
    srv.state = state
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def key_pair(tmp_path_factory):
    return keys.keygen(tmp_path_factory.mktemp("prune-keys") / "keys")


class History:
    """One test's candidate and release repositories on ``server``, its state and keys."""

    def __init__(self, server, key_pair, tmp_path: Path):
        uid = uuid.uuid4().hex[:8]
        self.flags = {"registry.url": server.host, "state_dir": str(tmp_path / "state"),
                      "registry.repository": f"ci/prune-{uid}",
                      "release.repository": f"release/prune-{uid}",
                      "verify.signing_key": str(key_pair[0]),
                      "release.trusted_keys": str(key_pair[1])}
        self.settings = config.load(self.flags, root=ROOT, environ={})
        self.client = client_for(self.settings)
        self.repo = self.settings.registry.repository
        self.out = tmp_path / "verify"
        self.out.mkdir()
        (self.out / "junit.xml").write_text('<testsuite name="smoke"/>')
        (self.out / "smoke.log").write_text(f"smoke log {uid}\n")

    def env(self) -> dict[str, str]:
        names = {k: "PADDLECD_" + k.replace(".", "_").upper() for k in self.flags}
        return clean_env(**{names[k]: v for k, v in self.flags.items()})

    def candidate(self, days_ago: float, *, signed: bool = True,
                  provenance: bool = False) -> str:
        """Push a candidate created ``days_ago`` days ago, with ``signed`` evidence (the JUnit
        referrer, the bundle and the ``.att`` tag verify writes) and push's signed
        ``provenance``."""
        created = (NOW - dt.timedelta(days=days_ago)).isoformat().replace("+00:00", "Z")
        digest = push_image(self.client.twin(), self.repo, f"cpu-{uuid.uuid4().hex[:7]}",
                            layers=1, layer_size=2048, created=created)
        reference = f"{self.settings.candidate_repo}@{digest}"
        if signed:
            checks = tuple(evidence.Check(name=f"{m}/test_{m}", passed=True, duration_s=0.1)
                           for m in evidence.REQUIRED_CHECKS)
            record = evidence.Evidence(digest=digest, reference=reference, variant="cpu",
                                       passed=True, versions={"paddle": "3.0.0"}, checks=checks,
                                       created=NOW.isoformat().replace("+00:00", "Z"))
            evidence.save(self.settings, record)
            registry_store.publish(self.settings, record, self.out)
        if provenance:
            build = {"base": f"{self.settings.registry.url}/base@sha256:" + "0" * 64,
                     "revision": "0" * 40, "built": created,
                     "dockerfile": {"path": "images/Dockerfile"}}
            image_provenance.attach(self.settings, build, reference=reference, digest=digest)
        return digest

    def candidates(self, *specs: tuple[float, bool, bool]) -> list[str]:
        """:meth:`candidate` of each (days_ago, signed, provenance), a few at once."""
        with ThreadPoolExecutor(4) as pool:
            return list(pool.map(lambda a: self.candidate(a[0], signed=a[1], provenance=a[2]),
                                 specs))

    def promote(self, version: str, digest: str) -> None:
        release.promote(self.settings, variant="cpu", version=version, digest=digest,
                        execute=True)

    def attached(self, digest: str) -> list[str]:
        """The candidate repository's tags about ``digest`` (referrers index, own tags,
        ``.att``)."""
        return [t for t in self.client.list_tags(self.repo)
                if t.startswith(referrers.tag_for(digest))]

    def exists(self, digest: str) -> bool:
        return prune._digest(self.client, self.repo, digest) is not None

    def releases(self) -> list[str]:
        return [r.digest for r in ledger.read(self.client, self.settings.release.repository)]


@pytest.fixture
def history(server, key_pair, tmp_path) -> History:
    return History(server, key_pair, tmp_path)


def _skopeo_pull(ref: str, dest: Path) -> None:
    subprocess.run(["skopeo", "copy", "--quiet", "--src-tls-verify=false", f"docker://{ref}",
                    f"dir:{dest}"], check=True, capture_output=True, timeout=120)


def _blob_bytes(server) -> int:
    root = server.root / "data" / "docker" / "registry" / "v2" / "blobs"
    return sum(p.stat().st_size for p in root.rglob("data"))


def test_ten_candidates_three_released_two_recent(history, server, tmp_path):
    # ages in days: two recent, eight old; 1.0.0, 1.1.0 (rolled back to) and 1.2.0 are old ones
    kept, signed, full = (False, False), (True, False), (True, True)
    digests = history.candidates((1, *kept), (2, *kept), (40, *full), (41, *signed), (42, *full),
                                 (43, *signed), (44, *full), (45, *signed), (46, *full),
                                 (47, *full))
    released = {digests[3]: "1.0.0", digests[5]: "1.1.0", digests[7]: "1.2.0"}
    for digest, version in released.items():
        history.promote(version, digest)
    release.rollback(history.settings, variant="cpu", to="1.1.0", execute=True)
    doomed = [digests[i] for i in (2, 4, 6, 8, 9)]
    # the referrers index, the JUnit, attestation and provenance referrers, the .att tag
    before = [history.attached(d) for d in digests]
    assert [len(tags) for tags in before] == [0, 0, 5, 4, 5, 4, 5, 4, 5, 5]

    done = invoke("release.prune", "--variant", "cpu", "--keep-days", "30", "--keep-last", "1",
                  "--dry-run", "--json", env=history.env())
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    verdicts = {c["digest"]: (c["delete"], c["reason"]) for c in plan["candidates"]}
    assert sorted(d for d, (delete, _) in verdicts.items() if delete) == sorted(doomed)
    assert verdicts[digests[0]] == (False, "newest 1")
    assert verdicts[digests[1]] == (False, "younger than 30 days")
    assert verdicts[digests[5]] == (False, "released: 1.1.0-cpu, rollback target, 1-cpu, "
                                           "1.1-cpu, latest-cpu")
    assert verdicts[digests[3]] == (False, "released: 1.0.0-cpu, 1.0-cpu")
    assert {verdicts[d][1].startswith("released: ") for d in released} == {True}
    assert all(len(c["attached"]) == 5 for c in plan["candidates"] if c["delete"])
    assert plan["bytes_freed"] > 5 * 2048
    assert "dry run: nothing deleted" in done.stderr
    assert done.stderr.count("\n  delete  ") == 5 and done.stderr.count("\n  keep    ") == 5
    assert all(history.exists(d) for d in digests)  # the dry run deleted nothing

    outcome = prune.prune(history.settings, prune.plan(history.settings, "cpu", keep_days=30,
                                                       keep_last=1))
    assert sorted(outcome.deleted) == sorted(doomed) and not outcome.skipped
    for d, attached in zip(digests, before):
        assert history.exists(d) is (d not in doomed)
        assert history.attached(d) == ([] if d in doomed else attached)

    size = _blob_bytes(server)
    gc = subprocess.run(["bash", str(ROOT / "scripts" / "stack.sh"), "gc"], capture_output=True,
                        text=True, timeout=120, env={**os.environ,
                                                     "PADDLECD_STATE_DIR": str(server.state)})
    assert gc.returncode == 0, gc.stdout + gc.stderr
    assert "garbage-collect freed" in gc.stdout
    assert size - _blob_bytes(server) >= plan["bytes_freed"]
    for i, digest in enumerate(released):  # every release still pulls by digest, blobs and all
        _skopeo_pull(f"{history.settings.release_repo}@{digest}", tmp_path / f"r{i}")
    again = prune.plan(history.settings, "cpu", keep_days=30, keep_last=1)
    assert again.doomed == []


def test_a_promotion_racing_the_prune_keeps_its_candidate(history):
    old = history.candidates((50, False, False), (51, True, False), (52, True, False))
    plan = prune.plan(history.settings, "cpu", keep_days=30, keep_last=1)
    assert [c.digest for c in plan.doomed] == [old[2], old[1]]
    versions = {"recheck": (old[2], "2.0.0"), "delete": (old[1], "2.1.0")}

    def race(point: str, digest: str) -> None:  # a promotion lands at each point of the prune
        if versions.get(point, ("",))[0] == digest:
            history.promote(versions[point][1], digest)

    before = {d: sorted(history.attached(d)) for d in old}
    outcome = prune.prune(history.settings, plan, hook=race)
    assert outcome.deleted == []
    assert list(outcome.skipped) == [old[2]] and outcome.restored == [old[1]]
    for d in old:
        assert history.exists(d) and sorted(history.attached(d)) == before[d]
    assert set(history.releases()) == {old[2], old[1]}
    # the restored candidate is whole: the promotion's source still proves itself
    assert registry_store.lookup(history.settings, prune_ref(history, old[1]))[0].verified


def prune_ref(history, digest):
    from paddlecd.registry.reference import parse_reference

    return parse_reference(f"{history.settings.candidate_repo}@{digest}")


KILLED = """
import os, signal, sys, json
from paddlecd import config
from paddlecd.errors import RegistryError
from paddlecd.image import provenance as image_provenance
from paddlecd.release import prune
flags, target, root = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
settings = config.load(flags, root=__import__("pathlib").Path(root), environ={})
delete = prune._delete
def killing(client, repo, digest):  # the candidate's referrers are gone, the image is not
    if digest == target:
        os.kill(os.getpid(), signal.SIGKILL)
    delete(client, repo, digest)
prune._delete = killing
prune.prune(settings, prune.plan(settings, "cpu", keep_days=30, keep_last=1))
"""


def test_a_prune_killed_mid_way_converges_on_rerun(history, tmp_path):
    digests = history.candidates((60, False, False), (61, True, True), (62, True, False),
                                 (63, False, False))
    history.promote("1.0.0", digests[2])
    doomed = [digests[3], digests[1]]  # oldest first; digests[0] is the newest
    killed = subprocess.run([sys.executable, "-c", KILLED, json.dumps(history.flags), doomed[1],
                             str(ROOT)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env={**clean_env(), "PYTHONPATH": str(ROOT / "src")})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not history.exists(doomed[0])
    assert history.exists(doomed[1]) and history.attached(doomed[1]) == []  # half done
    plan = prune.plan(history.settings, "cpu", keep_days=30, keep_last=1)
    assert [(c.digest, c.attached) for c in plan.doomed] == [(doomed[1], ())]
    assert prune.prune(history.settings, plan).deleted == [doomed[1]]
    assert [history.exists(d) for d in digests] == [True, False, True, False]
    assert history.attached(digests[2]) and history.releases() == [digests[2]]
    assert prune.plan(history.settings, "cpu", keep_days=30, keep_last=1).doomed == []


def test_a_registry_without_deletes_gets_the_setting_named(key_pair, tmp_path):
    srv = RegistryServer(tmp_path / "no-delete", port=free_port(), delete=False).start()
    try:
        history = History(srv, key_pair, tmp_path)
        digests = [push_image(history.client, history.repo, f"cpu-{n:07x}", layers=1,
                              created=f"2026-0{n}-01T00:00:00Z") for n in (1, 2)]
        referrers.push(history.client, history.repo,
                       history.client.resolve(history.repo, digests[0]),
                       artifact_type="application/vnd.example+json",
                       layers=[referrers.Layer("application/json", b"{}", "x.json")],
                       annotations={})
        the_plan = prune.plan(history.settings, "cpu", keep_last=1)
        assert [c.digest for c in the_plan.doomed] == [digests[0]]
        with pytest.raises(RegistryError) as refused:
            prune.prune(history.settings, the_plan)
        error = refused.value  # what the CLI prints as its error: and hint: lines (exit 5)
        assert error.exit_code == 5 and "\n" not in error.cause + error.hint
        assert "refuses deletes (HTTP 405 UNSUPPORTED)" in error.cause
        assert "storage.delete.enabled" in error.hint
        assert "REGISTRY_STORAGE_DELETE_ENABLED" in error.hint
        assert all(history.exists(d) for d in digests) and len(history.attached(digests[0])) == 2
    finally:
        srv.stop()


def test_a_candidate_also_tagged_by_hand_is_kept_with_its_tag(history):
    """Trial 7: a team tagged an old candidate ``qa-approved`` by hand (skopeo copy); the prune's
    plan did not show that tag, and the delete by digest took the tag with the image. A digest
    with a tag no candidate rule owns now stays, and the plan says which tag."""
    _, old, other = history.candidates((1, False, False), (40, True, False), (41, True, False))
    manifest = history.client.get_manifest(history.repo, old)
    history.client.put_manifest(history.repo, "qa-approved", manifest.raw,
                                manifest.descriptor.media_type)
    the_plan = prune.plan(history.settings, "cpu", keep_days=30, keep_last=1)
    verdicts = {c.digest: (c.delete, c.reason) for c in the_plan.candidates}
    assert verdicts[old] == (False, "also tagged qa-approved (no candidate tag)")
    assert verdicts[other][0] is True
    prune.prune(history.settings, the_plan)
    assert history.client.resolve(history.repo, "qa-approved").digest == old
    assert not history.exists(other)


def test_the_variants_current_candidate_is_kept_whatever_its_created_time(history):
    """Trial 9: BuildKit keeps a cached build's ``created``, so the candidate just pushed looked
    40 days old; ``keep_last: 1`` deleted it (the newest by ``created`` kept), and verify then
    failed with "manifest unknown". The digest in candidates/<variant>.json is always kept."""
    from paddlecd.image import candidate as candidates

    pushed, newer = history.candidates((40, True, False), (1, True, False))
    candidates.save_candidate(history.settings, "cpu", digest=pushed, tag="cpu-test",
                              reference=f"{history.settings.candidate_repo}@{pushed}")
    the_plan = prune.plan(history.settings, "cpu", keep_days=30, keep_last=1)
    verdicts = {c.digest: (c.delete, c.reason) for c in the_plan.candidates}
    assert verdicts[pushed] == (False, "the variant's current candidate (what verify and "
                                       "promote take)")
    assert verdicts[newer] == (False, "newest 1")
    prune.prune(history.settings, the_plan)
    assert history.exists(pushed) and history.exists(newer)

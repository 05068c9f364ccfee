"""The ledger's invariants (src/paddlecd/release/ledger.py) against a real distribution registry.

Prior history is written as an older paddlecd wrote it (records only, the same format, back-dated);
requests are counted by the benchmarks' relay (benchmarks/relay.py) before a plain-HTTP registry.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_release import Project

from paddlecd.errors import ConfigError, PromotionError
from paddlecd.registry.client import OCI_MANIFEST, RegistryClient
from paddlecd.registry.embedded import RegistryServer, free_port
from paddlecd.release import ledger
from paddlecd.release import promote as release

from support.ledger_reads import read_each
from support.oci_images import push_image

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from relay import Relay  # noqa: E402

INVOKE = str(Path(sys.executable).parent / "invoke")
ALL = ("1.4.0-cpu", "1.4-cpu", "1-cpu", "latest-cpu")


@pytest.fixture(scope="module")
def plain_registry(tmp_path_factory, docker_engine):
    server = RegistryServer(tmp_path_factory.mktemp("ledger-registry"), port=free_port()).start()
    yield server
    server.stop()


@pytest.fixture
def relay(plain_registry):
    with Relay(plain_registry.port) as r:
        yield r


@pytest.fixture
def project(relay, tmp_path) -> Project:
    return Project(tmp_path, **{"registry.url": relay.host})


def old_records(
    client: RegistryClient, repo: str, n: int, variant: str = "cpu", *, digest: str | None = None
) -> list[ledger.Record]:
    """``n`` promotion records of 0.0.<i>, one a day until yesterday, as paddlecd before checkpoints
    wrote them (records only, no checkpoint)."""
    digest = digest or push_image(client, repo)
    start = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=n + 1)
    records = []
    for i in range(n):
        when = start + dt.timedelta(days=i)
        record = ledger.Record(
            id=ledger.new_id(variant, when),
            action="promote",
            variant=variant,
            version=f"0.0.{i}",
            digest=digest,
            source=f"{client.registry}/x@{digest}",
            target=f"{client.registry}/{repo}",
            who="older paddlecd",
            when=when.isoformat().replace("+00:00", "Z"),
        )
        ledger.append(client, repo, record)
        records.append(record)
    return records


def reads(client: RegistryClient, repo: str, variant: str = "cpu") -> tuple[ledger.View, int]:
    """A fresh process's read of ``variant``: (view, requests it made)."""
    ledger.clear_cache()
    before = client.stats["requests"]
    view = ledger.read_view(client, repo, variant, client.list_tags(repo))
    return view, client.stats["requests"] - before


def test_checkpoint_reads_what_every_record_says_in_bounded_requests(project):
    client, repo = project.client, project.settings.release.repository
    old_records(client, repo, 20)
    old_records(client, repo, 5, "cu126")
    view, requests = reads(client, repo)
    assert (view.checkpoint, view.fetched, requests) == (None, 20, 21)  # the old cost: one GET each
    assert view.stale
    ledger.write_checkpoint(client, repo, view)
    old_records(client, repo, 3)  # written after the checkpoint
    view, requests = reads(client, repo)
    assert (view.covered, view.fetched, requests) == (
        20,
        3,
        1 + 2 + 3,
    )  # list, checkpoint, 3 records
    assert list(view.records) == read_each(client, repo, "cpu")
    assert ledger.read(client, repo) == sorted(read_each(client, repo), key=lambda r: r.id)
    assert {r.variant for r in ledger.read(client, repo)} == {"cpu", "cu126"}


def test_promotion_cost_does_not_grow_with_history(relay, tmp_path):
    """Requests of a promotion into 10 and into 40 prior records (both checkpointed) are equal."""
    counts = {}
    for n in (10, 40):
        p = Project(tmp_path / str(n), **{"registry.url": relay.host})
        old_records(p.client, p.settings.release.repository, n)
        p.candidate()
        p.promote("1.0.0")  # the upgrade: reads every record once, writes the checkpoint
        p.candidate()
        ledger.clear_cache()
        relay.reset()
        out = p.promote("1.1.0")
        counts[n] = relay.reset()
        assert out.checkpoint is None and "write checkpoint" not in dict(out.phases)
    # the registry's own 500s (retried) are not the promotion's cost: distribution answers one
    # now and then to the read-back of a moving tag written beside another (benchmarks/relay.py).
    # A string, not a tuple: pytest cuts a tuple's repr in the middle, where the kinds differ.
    assert counts[10].client_requests == counts[40].client_requests, (
        f"into 10: {counts[10].by_kind()} ({counts[10].server_errors} answered 5xx)\n"
        f"into 40: {counts[40].by_kind()} ({counts[40].server_errors} answered 5xx)")
    # bytes grow only with the tag list (distribution returns it whole: ~100 bytes a tag per
    # listing, two listings a promotion) and the checkpoint blob (gzip'd): not with a GET a record
    assert abs(counts[10].down - counts[40].down) < 4096 + 2 * 100 * 30, counts


def test_upgrade_promotion_writes_the_checkpoint(project):
    client, repo = project.client, project.settings.release.repository
    old = old_records(client, repo, 9)
    digest = project.candidate()
    out = project.promote("1.4.0")
    assert [name for name, _ in out.phases][-2:] == ["verify digests", "write checkpoint"]
    view, _ = reads(client, repo)
    assert view.checkpoint == out.checkpoint and (view.covered, view.fetched) == (10, 0)
    assert [r.id for r in view.records[:-1]] == [r.id for r in old]
    assert all(project.tag(t) == digest for t in ALL)


def test_records_of_an_older_and_a_newer_paddlecd_are_read(project):
    client, repo = project.client, project.settings.release.repository
    digest = push_image(client, repo)
    old = {
        "schema": 1,
        "id": ledger.new_id("cpu"),
        "action": "promote",
        "variant": "cpu",
        "version": "1.3.0",
        "digest": digest,
        "source": "s",
        "target": "t",
        "tags": ["1.3.0-cpu"],
        "previous": {},
    }
    newer = {
        **old,
        "id": ledger.new_id("cpu"),
        "version": "1.3.1",
        "schema": 2,
        "signed_by": "key-1",
    }
    for doc in (old, newer):  # written the way append writes, with exactly these bytes
        body = json.dumps(doc).encode()
        ledger._put_artifact(
            client, repo, doc["id"], body, ledger.RECORD_TYPE, {ledger.ANNOTATION: body.decode()}
        )
    view, _ = reads(client, repo)
    assert [(r.version, r.who, r.evidence) for r in view.records] == [
        ("1.3.0", "", None),
        ("1.3.1", "", None),
    ]
    ledger.write_checkpoint(client, repo, view)
    assert list(reads(client, repo)[0].records) == list(view.records)


def _checkpoint_of(client: RegistryClient, repo: str, variant: str, records: list[dict]) -> None:
    """A checkpoint with exactly ``records`` (as a crashed or buggy promoter could have left it)."""
    body = gzip.compress(json.dumps({"schema": 1, "variant": variant, "records": records}).encode())
    ledger._put_artifact(
        client, repo, ledger.checkpoint_tag(variant), body, ledger.CHECKPOINT_TYPE, {}
    )


def test_a_checkpoint_cannot_promise_a_record_the_registry_lacks(project):
    """A checkpoint written from a plan (the record was never written): the phantom is dropped."""
    client, repo = project.client, project.settings.release.repository
    real = old_records(client, repo, 2)
    phantom = dataclasses.replace(real[-1], id=ledger.new_id("cpu"), version="9.9.9")
    _checkpoint_of(client, repo, "cpu", [json.loads(r.to_json()) for r in (*real, phantom)])
    view, _ = reads(client, repo)
    assert [r.version for r in view.records] == ["0.0.0", "0.0.1"] and view.dropped == 1
    assert list(view.records) == read_each(client, repo, "cpu")
    assert view.stale  # the next promotion replaces it


@pytest.mark.parametrize("kind", ["garbage", "other variant", "not ours", "stray blob", "older"])
def test_a_bad_or_stale_checkpoint_changes_no_read(project, kind):
    client, repo = project.client, project.settings.release.repository
    records = old_records(client, repo, 10)
    older = records[:2]  # 8 outside it: due for a new one
    if kind == "garbage":
        ledger._put_artifact(
            client,
            repo,
            ledger.checkpoint_tag("cpu"),
            b"\x1f\x8b not gzip",
            ledger.CHECKPOINT_TYPE,
            {},
        )
    elif kind == "other variant":
        _checkpoint_of(
            client,
            repo,
            "cpu",
            [
                json.loads(
                    dataclasses.replace(
                        r, id=r.id.replace("ledger.cpu.", "ledger.cu126."), variant="cu126"
                    ).to_json()
                )
                for r in records
            ],
        )
    elif kind == "not ours":
        ledger._put_artifact(
            client, repo, ledger.checkpoint_tag("cpu"), b"{}", "application/json", {}
        )
    elif kind == "stray blob":  # a crash after the blob upload, before the manifest
        body = gzip.compress(json.dumps({"schema": 1, "variant": "cpu", "records": []}).encode())
        client.upload_blob(repo, "sha256:" + hashlib.sha256(body).hexdigest(), body, len(body))
    else:  # a slow promoter's older checkpoint lands last (the tag is last-writer-wins)
        _checkpoint_of(client, repo, "cpu", [json.loads(r.to_json()) for r in older])
    view, _ = reads(client, repo)
    assert list(view.records) == records == read_each(client, repo, "cpu")
    assert (view.problem is not None) == (kind in ("garbage", "other variant", "not ours"))
    project.candidate()
    out = project.promote("1.4.0")
    assert out.checkpoint is not None  # replaced by one that covers every record
    view, requests = reads(client, repo)
    assert (view.fetched, view.problem, len(view.records), requests) == (0, None, 11, 3)


def test_concurrent_promoters_lose_no_record_and_agree(project, tmp_path):
    """Four runners (own state folders, no shared lock) promote at once into a history that is due a
    checkpoint, so they also write checkpoints concurrently."""
    client, repo = project.client, project.settings.release.repository
    old_records(client, repo, 12)
    states = [project.with_state(tmp_path / f"runner{i}") for i in range(4)]
    versions = ("1.4.0", "1.5.0", "1.4.1", "2.0.0")
    digests = {v: project.candidate(settings=s) for v, s in zip(versions, states)}
    errors = project.promote_at_once(versions, states)
    assert errors == []
    view, _ = reads(client, repo)
    assert list(view.records) == read_each(client, repo, "cpu") and len(view.records) == 16
    assert project.tag("latest-cpu") == project.tag("2-cpu") == digests["2.0.0"]
    assert project.tag("1-cpu") == project.tag("1.5-cpu") == digests["1.5.0"]
    assert project.tag("1.4-cpu") == digests["1.4.1"]


def test_killed_promotion_is_shown_as_missing_and_converges(plain_registry, tmp_path):
    """`invoke promote` is SIGKILLed right after its ledger record landed (the registry 0.2 s away
    while it runs, so the kill lands between the record and the tags; no delay before or after)."""
    with Relay(plain_registry.port) as slow:
        p = Project(tmp_path, **{"registry.url": slow.host})
        digest = p.candidate()
        slow.delay = 0.2  # read per request (benchmarks/relay.py)
        env = {
            **os.environ,
            "PADDLECD_STATE_DIR": p.flags["state_dir"],
            "PADDLECD_REGISTRY_URL": slow.host,
            "PADDLECD_REGISTRY_REPOSITORY": p.flags["registry.repository"],
            "PADDLECD_RELEASE_REPOSITORY": p.flags["release.repository"],
            "PADDLECD_VERIFY_SIGNING_KEY": p.flags["verify.signing_key"],
            "PADDLECD_RELEASE_TRUSTED_KEYS": p.flags["release.trusted_keys"],
        }
        env.pop("PADDLECD_REGISTRY_CA_FILE", None)
        direct, repo = (
            RegistryClient(plain_registry.host, insecure=True),
            p.settings.release.repository,
        )
        proc = subprocess.Popen(
            [INVOKE, "promote", "--variant", "cpu", "--version", "1.4.0", "--yes"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 120
        while not ledger.record_ids(direct.list_tags(repo), "cpu"):
            assert proc.poll() is None and time.monotonic() < deadline, (
                proc.stderr.read() if proc.stderr else ""
            )
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        slow.delay = 0.0
        assert proc.stderr
        proc.stderr.close()
        missing = [t for t in ALL if p.tag(t) is None]
        assert missing, "the kill came after every tag was written"
        [(record, tags)] = release.list_releases(p.settings, "cpu")
        assert record.digest == digest and {f"{t} (missing)" for t in missing} <= set(tags)
        out = p.promote("1.4.0")
        assert out.plan.record is None and sorted(out.written) == sorted(missing)
        assert all(p.tag(t) == digest for t in ALL) and len(p.records()) == 1
        [(_, tags)] = release.list_releases(p.settings, "cpu")
        assert tags == ["1-cpu", "1.4-cpu", "latest-cpu"]


def test_tags_written_elsewhere_are_shown_as_the_registry_has_them(project):
    first = project.candidate()
    project.promote("1.4.0")
    second = project.candidate()
    project.promote("1.5.0")
    repo = project.settings.release.repository
    manifest = project.client.get_manifest(repo, first)  # someone re-points latest by hand
    project.client.put_manifest(repo, "latest-cpu", manifest.raw, OCI_MANIFEST)
    rows = {r.version: tags for r, tags in release.list_releases(project.settings, "cpu")}
    assert rows["1.4.0"] == ["1.4-cpu", "latest-cpu"]
    assert rows["1.5.0"] == ["1-cpu", "1.5-cpu", "latest-cpu (on 1.4.0)"]
    [(_, tags, history)] = release.show(project.settings, "1.5.0-cpu")
    assert tags == rows["1.5.0"] and [h.digest for h in history] == [second]


def test_crash_after_the_record_is_marked_then_converges(project):
    digest = project.candidate()

    def crash_after_record(line: str) -> None:
        if line.startswith("ledger record "):
            raise RuntimeError("simulated crash")

    with pytest.raises(PromotionError, match="phase 'write ledger' failed"):
        project.promote("1.4.0", report=crash_after_record)
    [(_, tags)] = release.list_releases(project.settings, "cpu")
    assert tags == [
        "1.4.0-cpu (missing)",
        "1-cpu (missing)",
        "1.4-cpu (missing)",
        "latest-cpu (missing)",
    ]
    assert project.promote("1.4.0").plan.record is None
    assert all(project.tag(t) == digest for t in ALL)


@pytest.mark.parametrize("execute", [False, True])
def test_a_tag_the_registry_cannot_hold_is_refused_at_planning(project, execute):
    project.candidate()
    with pytest.raises(
        ConfigError, match=r"tag '1\.5\.0-a{120}-cpu' is not a valid image tag \(130 characters\)"
    ):
        project.promote("1.5.0-" + "a" * 120, execute=execute)
    assert project.client.list_tags(project.settings.release.repository) == []


def by_name(client: RegistryClient, repo: str, variant: str = "cpu") -> tuple[ledger.View | None,
                                                                             int]:
    """A fresh process's read by name of ``variant``: (view or None, requests it made)."""
    ledger.clear_cache()
    before = client.stats["requests"]
    view = ledger.read_by_name(client, repo, variant)
    return view, client.stats["requests"] - before


def test_a_promotion_reads_the_ledger_by_name_and_lists_the_tags_once(project, monkeypatch):
    """Invariant 5 and its cost: after the upgrade, a promotion's plan reads the ledger
    without the tag list of the release repository, and its reconcile lists it exactly once."""
    client, repo = project.client, project.settings.release.repository
    old_records(client, repo, 6)
    assert by_name(client, repo)[0] is None  # an older paddlecd's ledger: no head, list instead
    project.candidate()
    project.promote("1.0.0")  # the upgrade: listed, checkpointed
    listed: list[str] = []
    real, after = RegistryClient.list_tags, RegistryClient.list_tags_after
    monkeypatch.setattr(RegistryClient, "list_tags",
                        lambda self, r: listed.append(r) or real(self, r))
    monkeypatch.setattr(RegistryClient, "list_tags_after",
                        lambda self, r, last, **kw: listed.append(f"{r} after {last}")
                        or after(self, r, last, **kw))
    for version in ("1.1.0", "1.2.0", "1.3.0"):
        project.candidate()
        ledger.clear_cache()
        listed.clear()
        out = project.promote(version)
        # the window after the checkpoint's state, never the whole list (invariant 6)
        mine = [x for x in listed if x.startswith(repo)]
        assert len(mine) == 1 and mine[0].startswith(f"{repo} after ledger.cpu."), (version,
                                                                                    listed)
        assert out.plan.ledger_view.via == "head"
        assert out.plan.ledger_view.state is not None
    view, requests = by_name(client, repo)
    assert view is not None and requests <= 3 + ledger.CHECKPOINT_EVERY
    assert list(view.records) == read_each(client, repo, "cpu") == list(reads(client,
                                                                                      repo)[0].records)
    assert [r.parent for r in view.records[-3:]] == [r.id for r in view.records[-4:-1]]


def test_a_chain_into_an_older_or_a_missing_record_is_read_from_the_tags(project):
    client, repo = project.client, project.settings.release.repository
    old = old_records(client, repo, 2)
    head = client.get_manifest(repo, old[-1].id)  # a head on a record without parent
    client.put_manifest(repo, ledger.head_tag("cpu"), head.raw, OCI_MANIFEST)
    assert by_name(client, repo)[0] is None
    lost = dataclasses.replace(old[-1], id=ledger.new_id("cpu"), version="0.0.9",
                               parent=ledger.new_id("cpu"))  # its parent's tag never existed
    ledger.append(client, repo, lost)
    assert by_name(client, repo)[0] is None
    project.candidate()
    out = project.promote("1.4.0")
    assert out.plan.ledger_view.via == "tags" and len(out.plan.ledger_view.records) == 3


def test_a_record_off_the_chain_is_found_by_the_next_listing(project):
    """A promoter killed between its record and the head (or whose head a concurrent one wrote
    over) leaves a record the head chain does not reach; the next promotion's listing finds it and
    checkpoints it, so reads by name lag it by one promotion at most (invariant 5)."""
    client, repo = project.client, project.settings.release.repository
    digest = project.candidate()
    project.promote("1.0.0")
    first = by_name(client, repo)[0]
    assert first is not None and len(first.records) == 1
    orphan = dataclasses.replace(first.records[0], id=ledger.new_id("cpu"), version="1.0.1",
                                 parent=first.records[0].id)
    body = orphan.to_json()  # what append writes, without the head
    ledger._put_artifact(client, repo, orphan.id, body, ledger.RECORD_TYPE,
                         {ledger.ANNOTATION: body.decode()})
    view, _ = by_name(client, repo)
    assert view is not None and [r.version for r in view.records] == ["1.0.0"]
    project.candidate()
    out = project.promote("1.1.0")
    assert out.checkpoint is not None  # due because the listing held a record the plan missed
    view, _ = by_name(client, repo)
    assert view is not None and [r.version for r in view.records] == ["1.0.0", "1.0.1", "1.1.0"]
    assert list(view.records) == read_each(client, repo, "cpu")
    assert project.tag("1.0-cpu") == digest  # 1.0.1 claims the digest 1.0.0 has; 1.1.0 moved on
    assert project.tag("latest-cpu") == project.tag("1.1.0-cpu")


def test_concurrent_promoters_on_a_chained_ledger_lose_no_record_and_agree(project, tmp_path):
    """Four runners at once on a ledger with a head: each plan reads by name, so they chain from
    the same head and write over each other's head. No record is lost from the tags, the moving
    tags end on the fold of all, reads by name reach a subset, and all of it after one more
    promotion."""
    client, repo = project.client, project.settings.release.repository
    project.candidate()
    project.promote("1.0.0")
    states = [project.with_state(tmp_path / f"runner{i}") for i in range(4)]
    versions = ("1.4.0", "1.5.0", "1.4.1", "2.0.0")
    digests = {v: project.candidate(settings=s) for v, s in zip(versions, states)}
    errors = project.promote_at_once(versions, states)
    assert errors == []
    every = read_each(client, repo, "cpu")
    assert len(every) == 5 and list(reads(client, repo)[0].records) == every
    assert project.tag("latest-cpu") == project.tag("2-cpu") == digests["2.0.0"]
    assert project.tag("1-cpu") == project.tag("1.5-cpu") == digests["1.5.0"]
    assert project.tag("1.4-cpu") == digests["1.4.1"]
    view, _ = by_name(client, repo)
    assert view is not None and {r.id for r in view.records} <= {r.id for r in every}
    project.candidate()
    project.promote("2.1.0")
    view, _ = by_name(client, repo)
    assert view is not None and list(view.records) == read_each(client, repo, "cpu")


def full_fold(client: RegistryClient, repo: str, variant: str = "cpu"):
    """The fold of every record the tags list (the reference for a fold from a state)."""
    return ledger.View(variant=variant, records=tuple(read_each(client, repo, variant))
                       ).fold()


def test_a_promotion_from_the_checkpoint_state_folds_as_the_whole_history(project, monkeypatch):
    """Invariant 7: a promotion after a checkpoint with a state layer reads neither the records
    blob nor the whole tag list (one page after the window), and the state plus the records after
    it fold to what every record folds to — out-of-order versions and pre-releases included."""
    client, repo = project.client, project.settings.release.repository
    old_records(client, repo, 12)
    project.candidate()
    project.promote("1.0.0")  # the upgrade: the checkpoint, now with its state
    blobs: list[str] = []
    real = ledger._load_checkpoint
    monkeypatch.setattr(ledger, "_load_checkpoint",
                        lambda *a: blobs.append(a[2]) or real(*a))
    promoted = {semver_of("1.0.0")}
    for version in ("1.2.0", "1.1.0", "2.0.0-rc.1", "1.2.1", "0.9.0", "1.3.0"):
        project.candidate()
        ledger.clear_cache()
        blobs.clear()
        out = project.promote(version)
        view = out.plan.ledger_view
        assert view.state is not None and view.via == "head", version
        # no promotion reads the record copies, not even one that writes the next checkpoint
        assert blobs == [], (version, blobs)
        head = ledger.read_head(client, repo, "cpu")
        assert head is not None
        state, every = head.fold(), full_fold(client, repo)
        assert state.moving == every.moving, version
        assert {v: state.releases[v] for v in state.moving.values()} == {
            v: every.releases[v] for v in every.moving.values()}
        assert state.claimed | set(state.releases) == set(every.releases)
        promoted.add(semver_of(version))
        for tag, v in every.moving.items():  # the back-dated records wrote no tags of their own
            assert v not in promoted or project.tag(tag) == every.releases[v], (version, tag)
    assert project.tag("latest-cpu") == project.tag("1.3.0-cpu")
    assert project.tag("1.2-cpu") == project.tag("1.2.1-cpu")


def test_a_late_record_sends_the_reconcile_to_the_whole_history(project):
    """Invariant 7's limit: a record inside the window, older than the state's newest and not
    covered by it (its writer paused between naming and writing it), is not folded out of order:
    the reconcile reads the whole ledger, folds it in, and checkpoints it."""
    client, repo = project.client, project.settings.release.repository
    project.candidate()
    project.promote("1.0.0")
    ledger.write_checkpoint(client, repo, reads(client, repo)[0])
    head = ledger.read_head(client, repo, "cpu")
    assert head is not None and head.state is not None
    newest = ledger.id_time(head.newest)
    late = dataclasses.replace(read_each(client, repo, "cpu")[0], version="1.5.0",
                               id=ledger.new_id("cpu", newest - dt.timedelta(seconds=30)),
                               parent="")
    body = late.to_json()  # written without the head, as a paused writer's record lands
    ledger._put_artifact(client, repo, late.id, body, ledger.RECORD_TYPE,
                         {ledger.ANNOTATION: body.decode()})
    project.candidate()
    out = project.promote("1.1.0")
    assert out.plan.ledger_view.state is not None  # the plan started from the state ...
    assert out.checkpoint is not None  # ... and the reconcile's window held a late record
    every = full_fold(client, repo)
    assert every.releases[semver_of("1.5.0")] == late.digest
    assert project.tag("latest-cpu") == late.digest  # 1.5.0 > 1.1.0: the fold of all records
    head = ledger.read_head(client, repo, "cpu")
    assert head is not None and late.id in head.recent


def test_a_rollback_after_the_state_is_folded_from_the_history(project):
    """A record after the state that names a version the state knows only as claimed (a rollback
    to 1.0.0, which no moving tag names any more) makes the plan read the history by name."""
    client, repo = project.client, project.settings.release.repository
    first = project.candidate()
    project.promote("1.0.0")
    project.candidate()
    project.promote("1.0.1")
    ledger.write_checkpoint(client, repo, reads(client, repo)[0])
    state = ledger.read_head(client, repo, "cpu").state
    assert semver_of("1.0.0") in state.claimed and semver_of("1.0.0") not in state.releases
    release.rollback(project.settings, variant="cpu", to="1.0.0", execute=True)
    assert project.tag("latest-cpu") == first
    project.candidate()
    out = project.promote("1.2.0")
    assert out.plan.ledger_view.state is None and out.plan.ledger_view.via == "head"
    assert project.tag("1.0-cpu") == first and project.tag("latest-cpu") == project.tag(
        "1.2.0-cpu")


def test_a_checkpoint_without_state_is_read_by_name(project):
    """A checkpoint an older paddlecd wrote (records blob, no state layer) is read as before, and
    the next checkpoint carries the state."""
    client, repo = project.client, project.settings.release.repository
    project.candidate()
    project.promote("1.0.0")
    view = reads(client, repo)[0]
    doc = {"schema": 1, "variant": "cpu", "records": [json.loads(r.to_json())
                                                      for r in view.records]}
    body = gzip.compress(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode(), mtime=0)
    ledger._put_artifact(client, repo, ledger.checkpoint_tag("cpu"), body,
                         ledger.CHECKPOINT_TYPE, {})
    ledger.clear_cache()
    assert ledger.read_head(client, repo, "cpu") is None
    for version in ("1.1.0", "1.2.0", "1.3.0", "1.4.0", "1.5.0"):
        project.candidate()
        ledger.clear_cache()
        project.promote(version)
    assert ledger.read_head(client, repo, "cpu") is not None  # rewritten, with its state
    assert full_fold(client, repo).moving == ledger.read_head(client, repo, "cpu").fold().moving


def semver_of(text: str):
    import semver
    return semver.Version.parse(text)


def test_checkpoints_seal_segments_and_every_reader_sees_every_record(project, monkeypatch):
    """A checkpoint written from a partial view names the earlier segments again, unread, and seals
    its pending records into a new segment at SEAL of them (here 2): the full read (release.list's)
    still returns exactly the records the tags list, the config blob stays a records blob an older
    paddlecd reads (a subset: it fetches the rest by GET), and the promotions never read a
    segment."""
    monkeypatch.setattr(ledger, "SEAL", 2)  # each checkpoint (every 3 records) seals one
    client, repo = project.client, project.settings.release.repository
    old_records(client, repo, 6)
    project.candidate()
    project.promote("1.0.0")  # the upgrade: one segment of 7
    segments: list[str] = []
    real = ledger._segment
    monkeypatch.setattr(ledger, "_segment", lambda c, r, d, v: segments.append(d) or real(
        c, r, d, v))
    for i in range(1, 8):
        project.candidate()
        ledger.clear_cache()
        project.promote(f"1.{i}.0")
    assert segments == []
    manifest = client.get_manifest(repo, ledger.checkpoint_tag("cpu")).json()
    assert len(ledger._segments(manifest)) >= 3, manifest
    view, _ = reads(client, repo)
    assert list(view.records) == read_each(client, repo, "cpu") and len(view.records) == 14
    assert view.covered >= 12
    first = ledger._parse_checkpoint(ledger._get_blob(client, repo, manifest["config"]["digest"]),
                                     manifest["config"]["digest"], "cpu")
    assert set(first) < {r.id for r in view.records}  # what an older paddlecd starts from
    head = ledger.read_head(client, repo, "cpu")
    assert head is not None and head.fold().moving == full_fold(client, repo).moving
    assert project.tag("latest-cpu") == project.tag("1.7.0-cpu")


@pytest.fixture
def paging_project(plain_registry, tmp_path) -> Project:
    """A project whose registry answers tag lists a page at a time (the relay cuts distribution
    2.8.2's whole list as the OCI spec says; distribution 3 does this itself, but neither Debian
    nor PyPI has it: the README's figures for it were measured against one built by hand)."""
    with Relay(plain_registry.port, pages=5) as r:
        yield Project(tmp_path, **{"registry.url": r.host})


def test_on_a_registry_that_pages_a_promotion_lists_only_the_window(paging_project, monkeypatch):
    """Invariant 7 on a paging registry: after the checkpoint, each reconcile reads one or two
    pages after the window, never the whole tag list, and the fold agrees with every record."""
    project = paging_project
    client, repo = project.client, project.settings.release.repository
    old_records(client, repo, 30)  # 30 record tags + the releases: many pages of 5
    project.candidate()
    project.promote("1.0.0")  # the upgrade: the whole ledger, the checkpoint with its state
    listed: list[int] = []
    after = RegistryClient.list_tags_after

    def counted(self, r, last, **kw):
        tags, whole = after(self, r, last, **kw)
        assert not whole  # the relay pages: never a whole list
        listed.append(len(tags))
        return tags, whole

    monkeypatch.setattr(RegistryClient, "list_tags_after", counted)
    requests: list[str] = []
    real_request = RegistryClient.request
    monkeypatch.setattr(RegistryClient, "request", lambda self, m, url, *a, **k: (
        requests.append(url), real_request(self, m, url, *a, **k))[1])
    for i, version in enumerate(("1.1.0", "1.3.0", "1.2.0", "1.4.0", "1.5.0")):
        project.candidate()
        ledger.clear_cache()
        listed.clear()
        requests.clear()
        out = project.promote(version)
        assert out.plan.ledger_view.state is not None, version
        # the window holds this test's records (all younger than 10 minutes), checkpoint and
        # head, and the last page may run past them by up to 4 tags: pages of 5 followed by
        # their Link, never the 30 back-dated records nor the releases before the window
        assert listed and all(n <= (i + 2) + 2 + 4 for n in listed), (version, listed)
        pages = [u for u in requests if repo in u and "tags/list" in u]
        assert 1 <= len(pages) <= 3, pages
    assert full_fold(client, repo).moving == ledger.read_head(client, repo, "cpu").fold().moving
    assert project.tag("latest-cpu") == project.tag("1.5.0-cpu")
    assert project.tag("1.2-cpu") == project.tag("1.2.0-cpu")
    assert len(client.list_tags(repo)) > 40  # list_tags follows every page


@pytest.mark.parametrize("lost", ["segment", "state"])
def test_a_checkpoint_blob_the_registry_lost_changes_no_read(project, lost):
    """A checkpoint naming a blob the registry no longer has (deleted, garbage-collected, or a
    mirror that copied the manifest without it) is a broken cache, not a broken ledger: release
    reads and promotions answer from the records, as with a garbage checkpoint (invariant 1)."""
    client, repo = project.client, project.settings.release.repository
    old_records(client, repo, 6)
    project.candidate()
    project.promote("1.0.0")  # writes a checkpoint with its state layer
    manifest = client.get_manifest(repo, ledger.checkpoint_tag("cpu")).json()
    [state] = [x["digest"] for x in manifest["layers"] if x["mediaType"] == ledger.STATE_TYPE]
    victim = manifest["config"]["digest"] if lost == "segment" else state
    client.request("DELETE", f"{repo}/blobs/{victim}", [f"repository:{repo}:pull,push,delete"],
                   "deleting a checkpoint blob", ok=(202,))
    view, _ = reads(client, repo)
    assert list(view.records) == read_each(client, repo, "cpu") and len(view.records) == 7
    # (the state layer is not needed for the full read when it holds no pending records)
    assert (view.problem is not None) == (lost == "segment")
    assert ledger.read_head(client, repo, "cpu") is None or lost == "segment"
    ledger.clear_cache()
    [(record, _)] = [row for row in release.list_releases(project.settings, "cpu")
                     if row[0].version == "1.0.0"]
    ledger.clear_cache()
    assert release.show(project.settings, "1.0.0-cpu")
    digest = project.candidate()
    ledger.clear_cache()
    project.promote("1.1.0")
    assert project.tag("latest-cpu") == digest and len(read_each(client, repo, "cpu")) == 8


def test_a_state_that_disagrees_with_the_tags_is_not_trusted(project):
    """A state layer that parses and matches its digest but says the moving tags stand elsewhere
    than the registry has them (hand-edited, or written by a buggy promoter) is not folded from:
    the plan reads the history instead, so the moving tags end on the fold of every record."""
    client, repo = project.client, project.settings.release.repository
    first = project.candidate()
    project.promote("1.0.0")
    for version in ("1.1.0", "1.2.0"):
        project.candidate()
        project.promote(version)
    newest = project.tag("1.2.0-cpu")
    ledger.write_checkpoint(client, repo, reads(client, repo)[0])
    ledger.clear_cache()
    base = ledger._load_state(client, repo, "cpu")
    assert base is not None and base.state.moving["latest-cpu"] == semver_of("1.2.0")
    v100 = semver_of("1.0.0")
    lie = dataclasses.replace(base.state, moving={**base.state.moving, "latest-cpu": v100,
                                                  "1-cpu": v100},
                              releases={**base.state.releases, v100: first})
    body = ledger._state_blob("cpu", lie, base.newest, sorted(base.recent), base.count,
                              base.pending)
    key = "sha256:" + hashlib.sha256(body).hexdigest()
    client.upload_blob(repo, key, body, len(body))
    (seg, size), rest = base.segments[0], base.segments[1:]
    manifest = ledger._artifact_manifest(seg, size, ledger.CHECKPOINT_TYPE, {}, layers=[
        (ledger.STATE_TYPE, key, len(body)), *((ledger.CHECKPOINT_TYPE, d, n) for d, n in rest)])
    client.put_manifest(repo, ledger.checkpoint_tag("cpu"), manifest, OCI_MANIFEST)
    project.candidate()
    ledger.clear_cache()
    project.promote("1.0.5")
    assert project.tag("latest-cpu") == project.tag("1-cpu") == newest  # 1.2.0 > 1.0.5
    assert full_fold(client, repo).moving["latest-cpu"] == semver_of("1.2.0")


def test_a_rerun_after_a_kill_between_record_and_head_writes_no_second_record(project,
                                                                               monkeypatch):
    """The record lands, the head does not (the promoter dies between the two PUTs): the re-run of
    the same promotion on the same machine finds the record it had noted and adopts it (points
    the head at it) instead of writing a second record of the same release."""
    client, repo = project.client, project.settings.release.repository
    for version in ("1.0.0", "1.0.1", "1.0.2"):
        project.candidate()
        project.promote(version)
    digest = project.candidate()
    real = RegistryClient.put_manifest

    def die_at_the_head(self, repository, reference, *a, **k):
        if reference == ledger.head_tag("cpu"):
            raise KeyboardInterrupt  # as a SIGKILL there: nothing after it runs
        return real(self, repository, reference, *a, **k)

    monkeypatch.setattr(RegistryClient, "put_manifest", die_at_the_head)
    with pytest.raises(KeyboardInterrupt):
        project.promote("1.1.0")
    monkeypatch.setattr(RegistryClient, "put_manifest", real)
    killed = [r.id for r in read_each(client, repo, "cpu") if r.version == "1.1.0"]
    assert len(killed) == 1 and ledger.read_head(client, repo, "cpu").newest != killed[0]
    ledger.clear_cache()
    lines: list[str] = []
    out = project.promote("1.1.0", report=lines.append)
    assert any("adopting it" in line for line in lines), lines
    assert project.tag("latest-cpu") == digest
    assert [r.id for r in read_each(client, repo, "cpu") if r.version == "1.1.0"] == killed
    assert out.record == killed[0]
    assert client.get_manifest(repo, ledger.head_tag("cpu")).raw == client.get_manifest(
        repo, killed[0]).raw
    project.candidate()
    project.promote("1.2.0")  # the chain goes on from the adopted record
    head = ledger.read_head(client, repo, "cpu")
    assert head is not None and head.fold().moving == full_fold(client, repo).moving


@pytest.mark.parametrize("dies", ["before", "after"])
def test_a_first_promotion_killed_around_its_head_is_completed_by_the_rerun(project, monkeypatch,
                                                                           dies):
    """Trial 11: the first promotion of a repository killed with its record written and its head
    not (``before``): the re-run read the tags, found the release recorded, wrote its tags, and
    never wrote the head, so a read by name missed the record; the pending note stayed. Killed
    just after the head (``after``): the note stayed for good. The re-run completes both."""
    client, repo = project.client, project.settings.release.repository
    digest = project.candidate()
    real = RegistryClient.put_manifest

    def die_at_the_head(self, repository, reference, *a, **k):
        if reference == ledger.head_tag("cpu") and dies == "before":
            raise KeyboardInterrupt  # as a SIGKILL there: nothing after it runs
        out = real(self, repository, reference, *a, **k)
        if reference == ledger.head_tag("cpu"):
            raise KeyboardInterrupt
        return out

    monkeypatch.setattr(RegistryClient, "put_manifest", die_at_the_head)
    with pytest.raises(KeyboardInterrupt):
        project.promote("1.0.0")
    monkeypatch.setattr(RegistryClient, "put_manifest", real)
    pending = list((project.settings.state / "ledger").glob("pending-*.json"))
    assert len(pending) == 1
    assert (ledger.head(client, repo, "cpu") is None) == (dies == "before")
    ledger.clear_cache()
    project.promote("1.0.0")
    recorded = [r.id for r in read_each(client, repo, "cpu") if r.version == "1.0.0"]
    assert len(recorded) == 1 and ledger.head(client, repo, "cpu").id == recorded[0]
    assert project.tag("1.0.0-cpu") == digest and not pending[0].exists()
    ledger.clear_cache()
    assert ledger.read_by_name(client, repo, "cpu").records[-1].id == recorded[0]

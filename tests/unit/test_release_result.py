"""The release as scripts read it (``invoke promote --json``): the :class:`Released`
record of a promotion's outcome, planned and executed, and of a complete re-run. No services."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paddlecd.release import ledger
from paddlecd.release.plan import Plan, TagWrite
from paddlecd.release.promote import Outcome, Released, released

DIGEST = "sha256:" + "a" * 64
ATTESTATION = "sha256:" + "b" * 64
OLD = "sha256:" + "c" * 64


def _record(**changes) -> ledger.Record:
    fields = dict(id="ledger.cpu.20250101T000000000000Z-00000000", action="promote", variant="cpu",
                  version="1.4.0", digest=DIGEST, source="r:5000/cand@" + DIGEST,
                  target="r:5000/rel",
                  tags=("1.4.0-cpu", "latest-cpu"), attestation=ATTESTATION)
    return ledger.Record(**{**fields, **changes})


def _plan(record: ledger.Record | None, writes: list[TagWrite], view_records=()) -> Plan:
    return Plan("promote", "cpu", "1.4.0", DIGEST, "r:5000/cand@" + DIGEST, "r:5000/rel", "rel",
                writes, [], record, ledger_view=ledger.View("cpu", tuple(view_records)))


WRITES = [TagWrite("1.4.0-cpu", DIGEST, "1.4.0", None, None, False),
          TagWrite("latest-cpu", DIGEST, "1.4.0", OLD, "1.3.0", True)]


def test_a_planned_promotion_names_its_writes_and_no_record_yet():
    plan = _plan(_record(forced=True, reason="runner down"), WRITES)
    doc = json.loads(json.dumps(released(Outcome(plan=plan), executed=False).to_json()))
    assert doc["release"] == "1.4.0-cpu" and doc["reference"] == "r:5000/rel@" + DIGEST
    assert doc["executed"] is False and doc["written"] == [] and doc["record"] is None
    assert doc["planned"] == [
        {"tag": "1.4.0-cpu", "digest": DIGEST, "moving": False, "previous": None},
        {"tag": "latest-cpu", "digest": DIGEST, "moving": True, "previous": OLD}]
    assert doc["attestation"] == ATTESTATION and doc["forced"] is True
    assert doc["reason"] == "runner down"


def test_an_executed_promotion_names_the_record_and_tags_it_wrote():
    outcome = Outcome(plan=_plan(_record(), WRITES), written=["1.4.0-cpu", "latest-cpu"],
                      bytes_uploaded=12, record="ledger.cpu.20250102T000000000000Z-11111111")
    got = released(outcome, executed=True)
    assert isinstance(got, Released) and got.executed
    assert got.record == "ledger.cpu.20250102T000000000000Z-11111111"  # the id written, not planned
    assert got.written == ("1.4.0-cpu", "latest-cpu") and got.bytes_uploaded == 12
    assert got.to_json()["written"] == ["1.4.0-cpu", "latest-cpu"]


def test_a_complete_rerun_reports_the_record_the_ledger_has():
    earlier = _record(id="ledger.cpu.20241231T000000000000Z-22222222", attestation=OLD)
    other = _record(id="ledger.cpu.20241230T000000000000Z-33333333", version="1.3.0", digest=OLD)
    got = released(Outcome(plan=_plan(None, [], [other, earlier])), executed=True)
    assert got.record == earlier.id and got.attestation == OLD
    assert got.written == () and got.planned == ()


def test_a_plan_without_a_ledger_match_has_no_record():
    got = released(Outcome(plan=_plan(None, [], [])), executed=True)
    assert got.record is None and got.attestation is None and got.forced is False


def test_a_bump_that_is_no_part_is_refused_by_name_before_any_registry_is_asked(tmp_path):
    # issue 21 trial: `promote --variant cpu --bump huge` said "no candidate recorded" (or failed
    # in the plan phase), never naming --bump; the registry here is a closed port


    from paddlecd import config
    from paddlecd.errors import ConfigError
    from paddlecd.release.promote import promote

    root = Path(__file__).resolve().parents[2]
    s = config.load({"state_dir": str(tmp_path), "registry.url": "127.0.0.1:9"}, root=root,
                    environ={})
    with pytest.raises(ConfigError, match=r"--bump 'huge' is not major, minor or patch"):
        promote(s, variant="cpu", part="huge")
    assert list(tmp_path.iterdir()) == []


def test_a_rerun_after_a_kill_names_the_release_the_registry_still_serves():
    """Trial 4: a rollback killed after its ledger record, before its tag writes, was re-run;
    the plan said "latest-cpu → 1.0.0; was 1.0.0 (sha256:<1.1.0's digest>)" because the ledger
    already had the tag on 1.0.0. The registry's digest names the release it is on."""
    import semver

    from paddlecd.release.plan import _writes
    from paddlecd.release.policy import State

    a, b = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    v100, v110 = semver.Version.parse("1.0.0"), semver.Version.parse("1.1.0")
    folded = State(releases={v100: a, v110: b}, moving={"latest-cpu": v100, "1-cpu": v100,
                                                       "1.0-cpu": v100})
    have = {"1.0.0-cpu": a, "1.0-cpu": a, "1-cpu": b, "latest-cpu": b}
    writes, _ = _writes(have, folded, folded, v100, "cpu")
    assert {(w.tag, w.previous, w.previous_version) for w in writes} == {
        ("1-cpu", b, "1.1.0"), ("latest-cpu", b, "1.1.0")}
    unknown, _ = _writes({**have, "latest-cpu": "sha256:" + "c" * 64}, folded, folded, v100, "cpu")
    assert [w.previous_version for w in unknown if w.tag == "latest-cpu"] == [None]


def test_a_phase_that_fails_on_a_full_disk_names_the_path_and_the_df_hint():
    """Trial 10: promote on a full state folder said ``OSError: [Errno 28] No space left on
    device`` where every other task says "no space left on the device: PATH" and how to look."""
    import errno

    from paddlecd.errors import PromotionError
    from paddlecd.release.promote import Outcome

    with pytest.raises(PromotionError) as caught:
        with Outcome().phase("write ledger", lambda line: None):
            raise OSError(errno.ENOSPC, "No space left on device", "/s/ledger/pending-1.json")
    assert caught.value.cause == ("phase 'write ledger' failed: no space left on the device: "
                                  "/s/ledger/pending-1.json")
    assert "(df -h /)" in caught.value.hint  # the nearest folder that exists (trial 21)
    assert "Errno" not in str(caught.value)

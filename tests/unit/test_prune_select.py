"""Which candidates release.prune deletes: the selection rule, retention settings, the plan text."""

from __future__ import annotations

import datetime as dt

import pytest

from paddlecd import config
from paddlecd.errors import ConfigError
from paddlecd.release import prune
from paddlecd.release.prune import Found, select

from support import ROOT

NOW = dt.datetime(2026, 12, 1, 12, tzinfo=dt.timezone.utc)


def _found(n: int, days_ago: float | None) -> Found:
    when = None if days_ago is None else NOW - dt.timedelta(days=days_ago)
    return Found(f"sha256:{n:064x}", (f"cpu-{n:07x}",), when)


def _verdicts(found, protected=None, **kw):
    kw = {"keep_days": 30, "keep_last": 2, "now": NOW, **kw}
    return {int(c.digest[7:], 16): (c.delete, c.reason) for c in select(found, protected or {},
                                                                          **kw)}


def test_ten_candidates_three_released_two_recent():
    found = [_found(1, 1), _found(2, 2)] + [_found(n, 40 + n) for n in range(3, 11)]
    protected = {found[3].digest: "release 1.0.0-cpu (ledger)",
                 found[5].digest: "rollback to 1.1.0-cpu (ledger)",
                 found[7].digest: "tag latest-cpu"}
    got = _verdicts(found, protected, keep_last=1)
    assert got[1] == (False, "newest 1")
    assert got[2] == (False, "younger than 30 days")
    assert got[4] == (False, "released: release 1.0.0-cpu (ledger)")
    assert got[6] == (False, "released: rollback to 1.1.0-cpu (ledger)")
    assert got[8] == (False, "released: tag latest-cpu")
    assert sorted(n for n, (delete, _) in got.items() if delete) == [3, 5, 7, 9, 10]
    assert got[3][1] == "older than 30 days, not among the newest 1"


def test_released_counts_among_the_newest():
    # the newest is released: keep_last 2 keeps it and one more, not two more
    found = [_found(n, 100 + n) for n in range(1, 5)]
    got = _verdicts(found, {found[0].digest: "tag 1.0.0-cpu"})
    assert [n for n, (delete, _) in sorted(got.items()) if not delete] == [1, 2]


def test_a_release_is_kept_whatever_its_age_and_rank():
    found = [_found(n, n) for n in range(1, 6)] + [_found(9, 10_000)]
    got = _verdicts(found, {found[-1].digest: "attestation subject (sha256-…)"}, keep_days=1,
                    keep_last=1)
    assert got[9] == (False, "released: attestation subject (sha256-…)")


def test_no_created_time_is_kept_and_sorted_last():
    found = [_found(1, None), _found(2, 90), _found(3, 95)]
    got = _verdicts(found, keep_last=1)
    assert got[2] == (False, "newest 1")
    assert got[1] == (False, "no created time in its config")
    assert got[3][0] is True


def test_exactly_keep_days_old_goes():
    got = _verdicts([_found(1, 1), _found(2, 30)], keep_last=1)
    assert got[2][0] is True


def test_created_time_parsing():
    assert prune._created({"created": "2026-11-30T10:00:00.123456789Z"}) == dt.datetime(
        2026, 11, 30, 10, 0, 0, 123456, tzinfo=dt.timezone.utc)
    assert prune._created({"created": "2026-11-30T10:00:00+02:00"}).utcoffset() == dt.timedelta(
        hours=2)
    assert prune._created({}) is None
    assert prune._created({"created": "yesterday"}) is None


@pytest.fixture
def variants_file(tmp_path):
    text = (ROOT / "images" / "variants.yaml").read_text()
    text = text.replace("    python: \"3.11\"\n", "    python: \"3.11\"\n    retention:\n"
                        "      keep_days: 7\n", 1)
    path = tmp_path / "variants.yaml"
    path.write_text(text)
    return path


def test_retention_flags_then_variant_then_settings(variants_file, tmp_path):
    s = config.load({"variants_file": str(variants_file), "retention.keep_last": 4,
                     "state_dir": str(tmp_path / "state")}, root=ROOT)
    assert prune.retention(s, "cpu") == (7, 4)
    assert prune.retention(s, "cu126") == (30, 4)
    assert prune.retention(s, "cpu", keep_days=2, keep_last=1) == (2, 1)
    with pytest.raises(ConfigError, match="--keep-last must be 1 or more"):
        prune.retention(s, "cpu", keep_last=0)


def test_variant_retention_is_schema_checked(variants_file, tmp_path):
    variants_file.write_text(variants_file.read_text().replace("keep_days: 7", "keep_dayz: 7"))
    s = config.load({"variants_file": str(variants_file),
                     "state_dir": str(tmp_path / "state")}, root=ROOT)
    with pytest.raises(ConfigError, match="keep_dayz"):
        prune.retention(s, "cpu")


def test_retention_settings_from_the_environment(tmp_path):
    s = config.load(root=ROOT, environ={"PADDLECD_RETENTION_KEEP_DAYS": "3"})
    assert s.retention.keep_days == 3
    with pytest.raises(ConfigError, match="retention.keep_last"):
        config.load(root=ROOT, environ={"PADDLECD_RETENTION_KEEP_LAST": "0"})


def test_plan_lines_say_what_goes_and_why():
    found = [_found(1, 1), _found(2, 50)]
    chosen = select(found, {}, keep_days=30, keep_last=1, now=NOW)
    chosen[1] = prune.Candidate(**{**chosen[1].to_json(), "tags": tuple(chosen[1].tags),
                                   "attached": ("sha256:" + "e" * 64,)})
    plan = prune.Plan("cpu", "127.0.0.1:5000/paddlecd/paddle", 30, 1, tuple(chosen), 1234)
    lines = plan.lines()
    assert lines[1].split()[:2] == ["keep", "sha256:000000000000"]
    assert lines[2].startswith("  delete  sha256:000000000000  cpu-0000002       2026-10-12")
    assert lines[2].endswith("older than 30 days, not among the newest 1 (+1 attached)")
    assert lines[-1] == ("1 to delete (1 attached), 1 kept; 1234 bytes freed by registry "
                         "garbage-collect")
    assert [c.digest for c in plan.doomed] == [found[1].digest]
    assert plan.to_json()["candidates"][1]["attached"] == ["sha256:" + "e" * 64]


def test_the_pipeline_stage_prunes_with_its_parameters(monkeypatch, tmp_path):
    from paddlecd.pipeline import stages

    seen = {}
    chosen = select([_found(1, 1), _found(2, 50)], {}, keep_days=30, keep_last=1, now=NOW)
    the_plan = prune.Plan("cpu", "r/p", 30, 1, tuple(chosen), 99)

    def fake_plan(settings, variant, *, keep_days=None, keep_last=None):
        seen.update(variant=variant, keep_days=keep_days, keep_last=keep_last)
        return the_plan

    monkeypatch.setattr(prune, "plan", fake_plan)
    monkeypatch.setattr(prune, "prune", lambda s, p, report: prune.Outcome(p, deleted=["x"]))
    lines: list[str] = []
    ctx = stages.StageContext(settings=config.load(root=ROOT, environ={}), stage="prune",
                              variant="cpu", params={"keep_days": 14}, earlier={}, inputs={},
                              on_line=lines.append)
    stages.KINDS["prune"].run(ctx)
    assert seen == {"variant": "cpu", "keep_days": 14, "keep_last": None}
    assert ctx.outputs == {"deleted": 1, "kept": 1, "bytes_freed": 99}
    assert lines[0].startswith("prune r/p, variant cpu")
    assert stages.KINDS["prune"].changes == "registry"

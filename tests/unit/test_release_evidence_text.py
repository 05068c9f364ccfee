"""How release.list/show say a record's evidence: skipped checks (the GPU-only ones on a CPU image)
are said apart, as evidence.show says them, and records written before ``skipped`` existed read as
none skipped."""

from __future__ import annotations

from types import SimpleNamespace

from paddlecd.cli.release import _evidence_text


def _record(summary, forced=False, reason=""):
    return SimpleNamespace(evidence_summary=summary, forced=forced, reason=reason)


def test_skipped_checks_are_said_apart():
    summary = {"passed": True, "checks": 10, "skipped": 2, "failed": [], "created": "T"}
    assert _evidence_text(_record(summary)) == "8/10 checks passed, 2 skipped, T"


def test_a_failed_check_is_not_counted_as_passed():
    summary = {"passed": False, "checks": 10, "skipped": 2, "failed": ["a/b"], "created": "T"}
    assert _evidence_text(_record(summary)) == "7/10 checks passed, 2 skipped, T"


def test_an_older_record_without_skipped_reads_as_none_skipped():
    summary = {"passed": True, "checks": 4, "failed": [], "created": "T"}
    assert _evidence_text(_record(summary)) == "4/4 checks passed, T"


def test_no_evidence_and_a_forced_promotion():
    assert _evidence_text(_record(None, forced=True, reason="hotfix")) == (
        "no evidence; FORCED: hotfix"
    )

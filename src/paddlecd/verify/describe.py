"""How a signed run reads for a person: ``invoke evidence.show`` (one block per verify run)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from paddlecd.verify.stored import Run


def describe(run: Run) -> list[str]:
    """``run`` as lines for a reader: who verified what, where, when, with which key, figures."""
    if run.problem:
        return [f"attestation {run.manifest}: REJECTED: {run.problem.cause}"]
    v = run.verified
    assert v
    p, host = v.predicate, v.predicate.get("host") or {}
    checks = p.get("checks", [])
    lines = [
        f"attestation {run.manifest} ({'PASSED' if v.passed else 'FAILED'})",
        f"  subject:  {v.name}@{v.digest} "
        f"(variant {p.get('variant')}, revision {p.get('revision')})",
        f"  verified: {p.get('created')} by {(p.get('verifier') or {}).get('who')} on "
        f"{host.get('hostname')} (runner {host.get('runner') or '-'}, {host.get('arch')})",
        f"  key:      {v.keyid} trusted via {v.key_source}",
        *(f"  stored:   {where} ({layout})" for where, layout in zip(v.stored, run.layouts)),
        "  versions: "
        + ", ".join(f"{k} {val}" for k, val in (p.get("versions") or {}).items() if val),
        f"  checks:   {_tally(checks)}" + (f"; failed: {', '.join(v.failed)}" if v.failed else ""),
    ]
    lines += [
        f"    {c['name']}: {figures}"
        for c in checks
        if (figures := _figures(c.get("metrics") or {}))
    ]
    return lines + _charts(p)


def _tally(checks: list[Mapping[str, Any]]) -> str:
    """``8/10 passed, 2 skipped``: a skipped check counts as passed (evidence.Check) but is said
    apart, so a GPU check skipped on a CPU image is not read as run."""
    skipped = sum(c.get("skipped") is True for c in checks)
    ran = sum(c.get("passed") is True for c in checks) - skipped
    return f"{ran}/{len(checks)} passed" + (f", {skipped} skipped" if skipped else "")


def _charts(predicate: Mapping[str, Any]) -> list[str]:
    """The busbw and loss charts of a signed run; none when the record does not parse."""
    from paddlecd.errors import VerifyError
    from paddlecd.verify import charts, evidence

    try:
        record = evidence.Evidence.from_json(dict(predicate), source="attestation predicate")
    except VerifyError:
        return []
    return [line for chart in charts.charts(record) for line in ["", *chart.splitlines()]]


def _figures(metrics: Mapping[str, Any], limit: int = 4) -> str:
    scalars = [
        (k, val)
        for k, val in metrics.items()
        if isinstance(val, (int, float)) and not isinstance(val, bool)
    ]
    return ", ".join(
        f"{k}={val:.4g}" if isinstance(val, float) else f"{k}={val}" for k, val in scalars[:limit]
    )

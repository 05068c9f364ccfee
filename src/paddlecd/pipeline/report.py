"""How a pipeline run is reported: Markdown step summary, GitHub annotations, text and JSON lines.

GitHub Actions limits: a step's ``$GITHUB_STEP_SUMMARY`` holds at most 1 MiB ("Job summaries are
isolated between steps and each step is restricted to a maximum size of 1MiB", GitHub docs,
"Workflow commands for GitHub Actions › Adding a job summary"); a bigger one is refused and the step
shows an error. :func:`cap` keeps the text under the limit, counting what is already in the file
(verify appends its own table), and says what was cut. Annotations use the ``::error`` workflow
command with its property and data escaping (``%``, CR, LF, and ``:``/``,`` in properties).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from paddlecd.pipeline.records import Event, Summary

STEP_SUMMARY_LIMIT = 1024 * 1024  # bytes, GitHub's per-step limit
MARGIN = 4096  # room for the truncation note and for other writers of the same step
ICON = {
    "succeeded": "✅",
    "failed": "❌",
    "pending": "⏸",
    "running": "⏳",
    "interrupted": "⏹",
    "skipped": "➖",
    "reused": "♻",
}


def markdown(summary: Summary) -> str:
    """The run as Markdown: a header, one table row per stage × variant, and the failures in
    full."""
    icon = ICON.get(summary.status, "")
    head = (f"## {icon} pipeline `{summary.pipeline}` — {summary.status}\n\n"
            f"run `{summary.run_id}`, revision `{(summary.revision or '')[:12]}`, "
            f"variants: {', '.join(summary.variants) or 'none'} ({summary.selected_by}), "
            f"attempt {summary.attempts or 1}\n\n"
            "| stage | variant | status | seconds | key outputs |\n|---|---|---|---|---|\n")
    rows = []
    for s in summary.stages:
        for v, r in s.variants.items():
            outs = ", ".join(f"{k}: `{val}`" for k, val in _key_outputs(s.kind, r.outputs).items())
            rows.append(f"| {s.name} | {v} | {ICON.get(r.status, '')} {r.status} | "
                        f"{r.seconds or 0:.1f} | {outs} |\n")
    failures = [f"\n**{stage} ({v})**: {_md(r.error or '')}\n\n> {_md(r.hint or '')}\n"
                for stage, v, r in summary.failures()]
    return head + "".join(rows) + "".join(failures)


def _key_outputs(kind: str, outputs: Mapping[str, Any] | None) -> dict[str, Any]:
    # imported here: stages pulls in the image room; the CLI's doctor imports report for JSON lines
    from paddlecd.pipeline.stages import key_outputs

    return key_outputs(kind, outputs)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def cap(text: str, limit: int = STEP_SUMMARY_LIMIT, used: int = 0) -> str:
    """``text`` cut (at a line end) so that ``used + len(result in UTF-8) <= limit - MARGIN``, with
    a note saying how many bytes were left out. Returns ``text`` unchanged when it fits."""
    room = limit - MARGIN - used
    data = text.encode()
    if len(data) <= room:
        return text
    note = (
        "\n\n> ⚠ summary truncated: {} bytes left out (GitHub's step summary limit is 1 MiB); the "
        "full "
        "summary is summary.md in the run folder.\n"
    )
    keep = data[: max(0, room - len(note.encode()) - 20)].decode("utf-8", "ignore")
    keep = keep[: keep.rfind("\n") + 1] if "\n" in keep else ""
    return keep + note.format(len(data) - len(keep.encode()))


def to_step_summary(summary: Summary) -> str | None:
    """Append the run's Markdown to ``$GITHUB_STEP_SUMMARY`` when set, capped; returns what was
    written."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return None
    used = os.path.getsize(path) if os.path.exists(path) else 0
    text = cap(markdown(summary), used=used)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)
    return text


def _escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(s: str) -> str:
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def annotations(summary: Summary) -> list[str]:
    """``::error title=…::cause — hint`` lines, one per failed stage × variant (GitHub workflow
    commands)."""
    out = []
    for stage, v, r in summary.failures():
        title = _escape_property(f"pipeline {summary.pipeline}: {stage} ({v})")
        body = (r.error or "") + (f" — hint: {r.hint}" if r.hint else "")
        out.append(f"::error title={title}::{_escape_data(body)}")
    return out


def github_annotations(summary: Summary, environ: Mapping[str, str]) -> list[str]:
    """:func:`annotations` when running under GitHub Actions (``GITHUB_ACTIONS=true``), else none:
    outside Actions a ``::error::`` line is noise in a terminal."""
    return annotations(summary) if environ.get("GITHUB_ACTIONS") == "true" else []


def text(event: Event) -> str | None:
    """A one-line, human rendering of a runner event (None for events shown otherwise)."""
    name = event.event
    if name == "stage.start":
        kind = f" ({event.kind})" if event.kind != event.stage else ""
        return f"── {event.stage}{kind}: {', '.join(event.variants or ()) or 'nothing to do'}"
    if name == "variant.end":
        outs = "  ".join(f"{k}={v}" for k, v in (event.outputs or {}).items())
        status = event.status or ""
        line = (f"{ICON[status]} {event.stage:<11} {event.variant:<11} {status:<9} "
                f"{event.seconds or 0:7.1f}s  {outs}")
        return line + (f"\n   error: {event.error}" if status == "failed" else "")
    if name == "stage.end" and event.status == "reused":
        return f"{ICON['reused']} {event.stage:<11} reused from the earlier attempt"
    if name == "check":
        mark = {"passed": "✔", "skipped": "–"}.get(event.status or "", "✘")
        skipped = ", skipped" if event.status == "skipped" else ""
        return f"   {mark} {event.check} ({event.seconds or 0:.1f}s{skipped})"
    if name == "pipeline.end":
        return f"pipeline {event.pipeline} {event.status}; summary: {event.summary}"
    return None


def json_line(event: Event | Mapping[str, Any]) -> str:
    """One JSON object per line, for log collectors (``--log-format json``); takes a runner
    :class:`~paddlecd.pipeline.records.Event` or the CLI's own plan/log/doctor objects."""
    data = event.to_json() if isinstance(event, Event) else event
    return json.dumps(data, sort_keys=True, default=str)

"""Step summary Markdown under GitHub's 1 MiB limit, ::error:: annotations, text and JSON-lines
events."""

from __future__ import annotations

import dataclasses
import json

from paddlecd.pipeline import report
from paddlecd.pipeline.records import Event, Summary

ERROR = "verify failed for reg/repo@sha256:abc: export/jit: outputs differ"


def summary(rows: int = 1, error: str = ERROR, failed: bool = True) -> Summary:
    variants = {
        f"v{i}": {"status": "succeeded", "seconds": 1.5, "outputs": {"digest": f"sha256:{i:064d}"}}
        for i in range(rows)
    }
    if failed:
        variants["cpu"] = {"status": "failed", "seconds": 2.0, "outputs": {}, "error": error,
                           "hint": "see smoke.log"}
    return Summary.from_json({
        "schema": 1, "pipeline": "pr", "run_id": "20261129T000000Z-abcd", "status": "failed",
        "started": "2026-11-29T00:00:00Z", "revision": "f" * 40, "variants": list(variants),
        "selected_by": "--variant", "attempts": 1,
        "stages": [{"name": "push", "kind": "push", "status": "failed", "seconds": 3.5,
                    "variants": variants}]})


def test_markdown_has_one_row_per_stage_and_variant_with_key_outputs():
    text = report.markdown(summary(rows=2))
    assert "## ❌ pipeline `pr` — failed" in text
    assert f"| push | v1 | ✅ succeeded | 1.5 | digest: `sha256:{1:064d}` |" in text
    assert "**push (cpu)**: verify failed for reg/repo@sha256:abc" in text


def test_cap_leaves_small_text_alone():
    text = report.markdown(summary())
    assert report.cap(text) == text


def test_cap_cuts_a_big_summary_under_the_limit_with_a_note():
    text = report.markdown(summary(rows=20000))  # ~2 MiB
    assert len(text.encode()) > report.STEP_SUMMARY_LIMIT
    capped = report.cap(text)
    assert len(capped.encode()) <= report.STEP_SUMMARY_LIMIT - report.MARGIN
    assert "summary truncated" in capped and capped.startswith(text[:200])
    left_out = int(capped.split("summary truncated: ")[1].split(" bytes")[0])
    assert left_out == len(text.encode()) - len(
        capped.split("\n\n> ⚠ summary truncated")[0].encode()
    )
    body = capped.split("\n\n> ⚠")[0]
    assert body.endswith("|\n")  # cut at a line end, never inside a table row


def test_cap_counts_what_the_step_summary_already_holds():
    text = report.markdown(summary(rows=2000))  # ~200 KiB
    used = report.STEP_SUMMARY_LIMIT - 100 * 1024
    capped = report.cap(text, used=used)
    assert (
        used + len(capped.encode()) <= report.STEP_SUMMARY_LIMIT - report.MARGIN
        and "truncated" in capped
    )


def test_to_step_summary_appends_under_github_actions(tmp_path, monkeypatch):
    path = tmp_path / "step_summary.md"
    path.write_text(
        "x" * (report.STEP_SUMMARY_LIMIT - 50 * 1024)
    )  # verify already wrote most of it
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(path))
    written = report.to_step_summary(summary(rows=5000))
    assert written and "truncated" in written
    assert path.stat().st_size <= report.STEP_SUMMARY_LIMIT
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert report.to_step_summary(summary()) is None


def test_annotations_escape_workflow_command_characters():
    lines = report.annotations(summary(error="100% broken: a, b\nsecond line"))
    assert lines == [
        "::error title=pipeline pr%3A push (cpu)::100%25 broken: a, b%0Asecond line — hint: see "
        "smoke.log"
    ]
    assert report.annotations(summary(failed=False)) == []


def test_events_render_as_text_and_json_lines():
    data = {"event": "variant.end", "stage": "push", "kind": "push", "variant": "cpu",
            "status": "succeeded", "seconds": 2.25, "outputs": {"digest": "sha256:abc"},
            "pipeline": "pr", "run_id": "r", "time": "t"}
    event = Event.from_json(data)
    assert report.text(event) == "✅ push        cpu         succeeded     2.2s  digest=sha256:abc"
    assert json.loads(report.json_line(event)) == data  # the event; fields not set are left out
    assert "\n" not in report.json_line(dataclasses.replace(event, error="two\nlines"))
    plan = {"event": "plan", "lines": ["a"]}  # the CLI's own objects go through json_line too
    assert json.loads(report.json_line(plan)) == plan
    base = {"time": "t", "pipeline": "pr", "run_id": "r"}
    assert report.text(Event(event="pipeline.start", **base)) is None
    check = Event(event="check", check="environment/test_gpu_devices_visible", seconds=0.0, **base)
    skipped = dataclasses.replace(check, status="skipped")
    assert report.text(skipped) == "   – environment/test_gpu_devices_visible (0.0s, skipped)"
    assert report.text(dataclasses.replace(check, status="failed")).startswith("   ✘ ")
    start = Event(event="stage.start", stage="build", kind="build", variants=("cpu", "cu126"),
                  **base)
    assert report.text(start) == "── build: cpu, cu126"
    again = dataclasses.replace(start, stage="build-again")
    assert report.text(again) == "── build-again (build): cpu, cu126"
    assert json.loads(report.json_line(start))["variants"] == ["cpu", "cu126"]

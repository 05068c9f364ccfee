"""`invoke pipeline.run/list` bad inputs as a user meets them: one-line cause, hint, non-zero exit,
nothing written. Only --dry-run and refusals run here (no engine or registry needed)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import yaml

from support import ROOT, clean_env, invoke


def pipeline_cli(*args: str, state: Path, root: Path | None = None,
                 **env: str) -> subprocess.CompletedProcess:
    """``invoke *args`` with the state in ``state`` and, if given, another project ``root``."""
    where = {"PADDLECD_ROOT": str(root)} if root else {}
    return invoke(*args, env=clean_env(PADDLECD_STATE_DIR=str(state), **where, **env), timeout=120)


def project_with(tmp_path: Path, name: str, pipeline: dict) -> Path:
    root = tmp_path / "project"
    shutil.copytree(ROOT / "images", root / "images", ignore=shutil.ignore_patterns("lock.yaml"))
    (root / "pipelines").mkdir()
    (root / "pipelines" / f"{name}.yaml").write_text(yaml.safe_dump(pipeline))
    return root


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path):
    run = pipeline_cli("pipeline.run", "nightly", "--dry-run", state=tmp_path / "state")
    assert run.returncode == 0, run.stderr
    # the plan is progress for a human: stderr (stdout is for results)
    plan = run.stderr.splitlines()
    assert plan[0] == "pipeline nightly: variants cpu, cu118, cu126, cu120-p261 (all variants)"
    assert "changes the registry" in run.stderr
    assert "dry run: nothing run, nothing written" in run.stderr
    assert run.stdout == ""
    assert not (tmp_path / "state").exists()


def test_json_log_format_from_the_environment(tmp_path):
    run = pipeline_cli("pipeline.run", "pr", "--dry-run", state=tmp_path,
                       PADDLECD_LOG_FORMAT="json")
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    assert [e["event"] for e in events] == ["plan"] and events[0]["lines"][0].startswith(
        "pipeline pr: variants cpu"
    )


def test_bad_log_format(tmp_path):
    run = pipeline_cli("pipeline.run", "pr", "--log-format", "xml", state=tmp_path)
    assert (
        run.returncode == 2 and "error: --log-format must be text or json, got 'xml'" in run.stderr
    )


def test_a_base_ref_beside_variants_named_is_refused_not_ignored(tmp_path):
    """Trial 20: ``pipeline.run pr --variant cpu --base-ref nonexistent`` planned cpu, exit 0,
    the ref neither read nor mentioned (without --variant the same ref was refused)."""
    run = pipeline_cli("pipeline.run", "pr", "--dry-run", "--variant", "cpu", "--base-ref",
                       "nonexistent-ref-xyz", state=tmp_path / "state")
    assert run.returncode == 2, run.stderr
    assert ("error: --base-ref finds the variants a change touches, and --variant names them: "
            "give one") in run.stderr and not (tmp_path / "state").exists()


def test_unknown_pipeline(tmp_path):
    run = pipeline_cli("pipeline.run", "nigthly", state=tmp_path)
    assert run.returncode == 10
    assert run.stderr.splitlines() == [
        "error: unknown pipeline 'nigthly' (no pipelines/nigthly.yaml)",
        "hint: did you mean 'nightly'? known: nightly, pr, release",
    ]


def test_cycle_in_a_pipeline_file_is_one_line_and_a_hint(tmp_path):
    root = project_with(tmp_path, "loop", {"schema": 1, "stages": [
        {"stage": "build", "needs": ["push"]}, {"stage": "push", "needs": ["build"]}]})
    run = pipeline_cli("pipeline.run", "loop", state=tmp_path / "state", root=root)
    assert run.returncode == 10
    err = run.stderr.splitlines()
    assert (
        len(err) == 2
        and "stages form a cycle: " in err[0]
        and err[1].startswith("hint: remove one 'needs'")
    )
    assert not (tmp_path / "state").exists()


def test_unknown_stage_and_variant_in_a_pipeline_file(tmp_path):
    root = project_with(
        tmp_path, "typo", {"schema": 1, "variants": ["cpu"], "stages": [{"stage": "verfiy"}]}
    )
    run = pipeline_cli("pipeline.run", "typo", state=tmp_path / "state", root=root)
    assert (
        run.returncode == 10
        and "unknown stage 'verfiy'" in run.stderr
        and "did you mean 'verify'?" in run.stderr
    )
    root2 = project_with(
        tmp_path / "b", "v", {"schema": 1, "variants": ["cu12"], "stages": [{"stage": "verify"}]}
    )
    run = pipeline_cli("pipeline.run", "v", state=tmp_path / "state", root=root2)
    assert run.returncode == 10 and "unknown variant 'cu12'" in run.stderr
    assert not (tmp_path / "state").exists()


def test_pipeline_list(tmp_path):
    run = pipeline_cli("pipeline.list", state=tmp_path)
    assert run.returncode == 0
    assert any(
        line.startswith("pr ") and "lock-check -> build -> push -> verify" in line
        for line in run.stdout.splitlines()
    )
    assert any(
        line.startswith("release ") and "promote -> deploy -> upload" in line
        for line in run.stdout.splitlines()
    )


def test_a_resume_dry_run_shows_the_run_it_would_continue_and_refuses_as_resume_does(tmp_path):
    """Trial 4: ``pipeline.run pr --resume --dry-run`` planned a fresh run and passed a summary
    (schema 7) that ``--resume`` refuses."""
    old = json.loads((ROOT / "tests" / "data" / "pipeline-summary-v1.json").read_text())
    runs = tmp_path / "state" / "pipelines" / "pr"
    (runs / old["run_id"]).mkdir(parents=True)
    (runs / "latest").write_text(old["run_id"] + "\n")
    summary = runs / old["run_id"] / "summary.json"
    summary.write_text(json.dumps(old))
    before = summary.read_bytes()
    run = pipeline_cli("pipeline.run", "pr", "--resume", "--dry-run", state=tmp_path / "state")
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines()[0] == (f"resume run {old['run_id']} ({old['status']}): from "
                                          "stage verify (3 succeeded stage(s) reused)")
    assert summary.read_bytes() == before
    summary.write_text(json.dumps({**old, "schema": 7}))
    run = pipeline_cli("pipeline.run", "pr", "--resume", "--dry-run", state=tmp_path / "state")
    assert run.returncode == 10 and "summary schema 7, this paddlecd reads 1" in run.stderr

"""The `pr` pipeline end to end on the real engine and a real distribution registry (TLS +
htpasswd), for the `cpu` variant, as a user (or CI) runs it: a failure injected into verify, then
--resume.

The failure is real, not a hook: the first run sets PADDLECD_VERIFY_TIMEOUT=1, so the smoke
container is killed after one second and verify fails; lock-check, build and push have succeeded by
then. The resumed run (normal timeout) must run verify only, against the digest the first run
pushed.
"""

from __future__ import annotations

import json
import shutil

import pytest

from paddlecd.verify import evidence

from support import ROOT, cli_env, invoke, project_settings

# One worker runs the module: its tests read the module's runs (a failed run and its resume,
# ~14-22 s), which each worker would make again for the tests it got.
pytestmark = pytest.mark.xdist_group("pipeline")


@pytest.fixture(scope="module")
def pr_state(registry, main_state, paddle_base, tmp_path_factory):
    """An own state folder with a copy of the lock main_state holds (other tests keep theirs)."""
    state = tmp_path_factory.mktemp("pipeline-state")
    for name in (
        "lock.yaml",
        "lock.local.yaml",
    ):  # the shared pins and this machine's bootstrapped ones
        if (main_state / name).exists():
            shutil.copy(main_state / name, state / name)
    return state


def summary_of(state):
    folder = state / "pipelines" / "pr"
    run_id = (folder / "latest").read_text().strip()
    return folder / run_id, json.loads((folder / run_id / "summary.json").read_text())


@pytest.fixture(scope="module")
def failed_run(registry, pr_state, tmp_path_factory):
    step_summary = tmp_path_factory.mktemp("gha") / "step_summary.md"
    env = cli_env(
        registry,
        pr_state,
        PADDLECD_VERIFY_TIMEOUT="1",
        GITHUB_ACTIONS="true",
        GITHUB_STEP_SUMMARY=str(step_summary),
    )
    env.pop("GITHUB_BASE_REF", None)
    run = invoke("pipeline.run", "pr", "--variant", "cpu", env=env)
    folder, summary = summary_of(pr_state)
    return run, folder, summary, step_summary


@pytest.fixture(scope="module")
def resumed_run(failed_run, registry, pr_state):
    run = invoke(
        "pipeline.run", "pr", "--resume", "--log-format", "json", env=cli_env(registry, pr_state)
    )
    folder, summary = summary_of(pr_state)
    return run, folder, summary


def test_injected_verify_failure_stops_the_run_after_push(failed_run):
    run, folder, summary, _ = failed_run
    assert run.returncode == 10, run.stdout[-3000:] + run.stderr[-3000:]
    assert "error: pipeline pr: stage 'verify' failed for cpu" in run.stderr
    assert "invoke pipeline.run pr --resume" in run.stderr
    status = {s["name"]: s["status"] for s in summary["stages"]}
    assert status == {
        "lock-check": "succeeded",
        "build": "succeeded",
        "push": "succeeded",
        "verify": "failed",
    }
    assert summary["status"] == "failed" and summary["variants"] == ["cpu"]
    push = summary["stages"][2]["variants"]["cpu"]
    assert push["outputs"]["reference"].endswith("@" + push["outputs"]["digest"])
    # engine.wait turns docker-py's ReadTimeout (7.1: requests' ConnectionError "… Read timed
    # out." over the unix socket) into a timeout, which verify names as the smoke suite's (trial
    # 17: "container blissful_solomon did not finish within 10s", exit 4, no log)
    error = summary["stages"][3]["variants"]["cpu"]["error"]
    assert "the smoke suite in " in error and "did not finish within 1s (verify.timeout)" in error
    # the per-stage lines, with the digest as the push line's key output
    assert f"digest={push['outputs']['digest']}" in run.stdout
    assert (folder / "summary.md").read_text().count("| cpu |") == 4


def test_failure_is_annotated_and_summarised_for_github(failed_run):
    run, _, summary, step_summary = failed_run
    assert "::error title=pipeline pr%3A verify (cpu)::" in run.stdout
    text = step_summary.read_text()
    assert (
        "pipeline `pr` — failed" in text
        and summary["run_id"] in text
        and "| verify | cpu | ❌ failed |" in text
    )


def test_resume_runs_verify_only_on_the_recorded_digest(
    failed_run, resumed_run, registry, pr_state
):
    _, first_folder, first, _ = failed_run
    run, folder, summary = resumed_run
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert folder == first_folder and summary["run_id"] == first["run_id"]
    assert summary["status"] == "succeeded" and summary["attempts"] == 2
    attempts = {s["name"]: s["variants"]["cpu"]["attempt"] for s in summary["stages"]}
    assert attempts == {"lock-check": 1, "build": 1, "push": 1, "verify": 2}
    pushed = summary["stages"][2]["variants"]["cpu"]["outputs"]
    verified = summary["stages"][3]["variants"]["cpu"]["outputs"]
    assert verified["digest"] == pushed["digest"] and verified["reference"] == pushed["reference"]
    record = json.loads(open(verified["evidence"]).read())
    assert record["passed"] is True and record["digest"] == pushed["digest"]
    settings = project_settings(pr_state, registry=registry)
    assert evidence.load(settings, pushed["digest"]).passed is True


def test_resumed_run_logs_json_lines_one_event_per_stage_and_check(resumed_run):
    run, _, summary = resumed_run
    events = [
        json.loads(line) for line in run.stdout.splitlines() if line.strip()
    ]  # every line is JSON
    kinds = [e["event"] for e in events]
    assert (
        kinds[0] == "plan" and kinds[-1] == "pipeline.end" and events[-1]["status"] == "succeeded"
    )
    reused = [e["stage"] for e in events if e["event"] == "stage.end" and e["status"] == "reused"]
    assert reused == ["lock-check", "build", "push"]
    checks = [e for e in events if e["event"] == "check"]
    assert len(checks) == len(summary["stages"][3]["variants"]["cpu"]["outputs"]["checks"]) >= 4
    assert all(e["status"] in ("passed", "skipped") and e["variant"] == "cpu" for e in checks)
    skipped = {e["check"] for e in checks if e["status"] == "skipped"}
    assert (
        "environment/test_gpu_devices_visible" in skipped
        and "export/test_jit_save_load_and_inference" not in skipped
    )
    ends = [e for e in events if e["event"] == "variant.end"]
    assert [(e["stage"], e["status"]) for e in ends] == [("verify", "succeeded")]


def test_resume_with_no_previous_run_is_refused(registry, tmp_path):
    run = invoke("pipeline.run", "nightly", "--resume", env=cli_env(registry, tmp_path))
    assert run.returncode == 10
    assert "error: no previous run of pipeline 'nightly' to resume" in run.stderr
    assert "hint: start one: invoke pipeline.run nightly" in run.stderr
    assert not (tmp_path / "pipelines").exists()


def test_unknown_variant_changes_nothing(registry, tmp_path):
    run = invoke("pipeline.run", "pr", "--variant", "cu999", env=cli_env(registry, tmp_path))
    assert run.returncode == 2 and "unknown variant 'cu999'" in run.stderr
    assert not (tmp_path / "pipelines").exists()


# ------------------------------------------------------------------ release: promote → deploy →
# upload


@pytest.fixture(scope="module")
def release_root(tmp_path_factory):
    """A project root whose pipelines/release.yaml trains a short job (tmp output) and uploads to a
    tmp file:// store; images/ is the real one. Its own release repository keeps other tests'
    releases apart."""
    import yaml

    root = tmp_path_factory.mktemp("release-root")
    shutil.copytree(ROOT / "images", root / "images", ignore=shutil.ignore_patterns("lock.yaml"))
    shutil.copytree(ROOT / "smoke", root / "smoke")  # the check stage's loader lives there
    job = {
        "schema": 1,
        "name": "pipeline-train",
        "nodes": 2,
        "command": {"script": "train_linear.py", "args": ["--steps", "50"]},
        "code": {"path": str(ROOT / "examples"), "mountPath": "/workspace/examples"},
        "output": {"path": "out", "mountPath": "/output"},
        "model": "model",
        "resources": {"cpu": "1", "memory": "2Gi", "shm": "256Mi"},
        "activeDeadlineSeconds": 600,
    }
    (root / "train.yaml").write_text(yaml.safe_dump(job))
    (root / "pipelines").mkdir()
    (root / "pipelines" / "release.yaml").write_text(
        yaml.safe_dump(
            {
                "schema": 1,
                "variants": "one",
                "stages": [
                    {"stage": "promote"},
                    {
                        "stage": "deploy",
                        "with": {"job": "train.yaml", "nodes": 2, "cluster": "local"},
                    },
                    {
                        "stage": "upload",
                        "with": {"name": "linear-demo", "to": f"file://{root / 'store'}"},
                    },
                    {"stage": "check"},
                ],
            }
        )
    )
    return root


def test_release_pipeline_promotes_trains_and_uploads(
    resumed_run, registry, pr_state, release_root
):
    """promote (the pr run's verified digest, evidence required) → deploy (2 local containers, gloo,
    on the promoted digest) → upload (the jit.save export, with the promoted image in its
    manifest)."""
    env = cli_env(
        registry,
        pr_state,
        PADDLECD_ROOT=str(release_root),
        PADDLECD_RELEASE_REPOSITORY="paddlecd/pipeline-release",
    )
    plan = invoke(
        "pipeline.run", "release", "--variant", "cpu", "--version", "1.0.0", "--dry-run", env=env
    )
    assert plan.returncode == 0  # the plan is on stderr, results on stdout
    assert "changes the registry" in plan.stderr and "dry run" in plan.stderr
    assert not (pr_state / "pipelines" / "release").exists()

    run = invoke("pipeline.run", "release", "--variant", "cpu", "--version", "1.0.0", env=env)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-3000:]
    summary = json.loads(
        (
            pr_state
            / "pipelines"
            / "release"
            / (pr_state / "pipelines" / "release" / "latest").read_text().strip()
            / "summary.json"
        ).read_text()
    )
    out = {s["name"]: s["variants"]["cpu"]["outputs"] for s in summary["stages"]}
    verified = resumed_run[2]["stages"][3]["variants"]["cpu"]["outputs"]
    assert (
        out["promote"]["release"] == "1.0.0-cpu" and out["promote"]["digest"] == verified["digest"]
    )
    assert out["deploy"]["image"].endswith("@" + verified["digest"])
    assert out["deploy"]["model"] == str(release_root / "out" / "model")
    manifest = json.loads(
        (release_root / "store" / "linear-demo" / "1.0.0" / "manifest.json").read_text()
    )
    assert out["upload"]["url"].endswith("/linear-demo/1.0.0")
    assert verified["digest"] in json.dumps(manifest)
    # the promoted image's Paddle, and the model checked in it against its references
    assert (manifest["paddle_version"], manifest["paddle_version_from"]) == ("3.0.0", "image")
    assert out["check"]["status"] == "passed"
    check = json.loads(
        (release_root / "store" / "linear-demo" / "1.0.0" / "check.json").read_text()
    )
    assert check["limited"] is False and check["image"].endswith("@" + verified["digest"])

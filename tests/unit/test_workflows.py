"""The GitHub Actions workflows are checked here (issue 6): actionlint (with shellcheck when installed),
hadolint on the Dockerfiles, every `invoke` command they run exists with the flags they pass, and the
rules the issue sets (GPU matrix, approval environment, secrets only through env, pinned actions)."""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from invoke.parser import Parser

from support import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent


def load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def tool(name: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / name), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_workflows_exist():
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "gpu-smoke.yml", "release.yml"}


def test_actionlint_is_clean():
    r = tool("actionlint", "-no-color", "-config-file", ".github/actionlint.yaml",
             *[str(p.relative_to(ROOT)) for p in WORKFLOWS])
    assert r.returncode == 0, r.stdout + r.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path):
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "bad.yml").write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo ${{ matrix.nope }}\n")
    r = tool("actionlint", "-no-color", ".github/workflows/bad.yml", cwd=tmp_path)
    assert r.returncode != 0 and "matrix" in r.stdout


@pytest.mark.parametrize("dockerfile", ["images/Dockerfile", "images/base/Dockerfile.cpu"])
def test_hadolint_is_clean(dockerfile):
    r = tool("hadolint", "--config", str(ROOT / ".hadolint.yaml"), dockerfile)
    assert r.returncode == 0, r.stdout + r.stderr


def test_hadolint_still_flags_other_rules(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian:latest\nRUN apt-get update && apt-get install -y curl\n")
    r = tool("hadolint", "--config", str(ROOT / ".hadolint.yaml"), str(bad))
    assert r.returncode != 0 and "DL3007" in r.stdout and "DL3008" in r.stdout


# ------------------------------------------------------------------ invoke commands vs tasks.py


def tasks_namespace():
    spec = importlib.util.spec_from_file_location("paddlecd_tasks_under_test", ROOT / "tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ns


def expand(text: str, env: dict[str, str]) -> str:
    """Replace ``${{ … }}`` by a value (``format('--flag {0}', …)`` keeps its flag) and ``$VAR`` by env."""
    def expr(m):
        flags = re.findall(r"format\('([^']*)\{0\}'", m.group(1))
        return " ".join(f + "X" for f in flags) if flags else "X"

    text = re.sub(r"\$\{\{(.*?)\}\}", expr, text, flags=re.S)
    return re.sub(r"\$\{?([A-Z_][A-Z0-9_]*)\}?", lambda m: expand(env.get(m.group(1), "X"), env), text)


def invoke_commands():
    for path in WORKFLOWS:
        wf = load(path)
        for job_name, job in wf["jobs"].items():
            for step in job.get("steps", []):
                env = {**(wf.get("env") or {}), **(job.get("env") or {}), **(step.get("env") or {})}
                for line in (step.get("run") or "").splitlines():
                    if line.strip().startswith("invoke "):
                        yield f"{path.name}:{job_name}", shlex.split(expand(line.strip(), env))[1:]


COMMANDS = list(invoke_commands())


def test_workflows_call_invoke():
    called = {argv[0] for _, argv in COMMANDS}
    assert {"pipeline.run", "doctor", "promote"} <= called


@pytest.mark.parametrize("where,argv", COMMANDS, ids=[f"{w}:{' '.join(a)}" for w, a in COMMANDS])
def test_every_invoke_command_exists_with_its_flags(where, argv):
    parsed = Parser(contexts=tasks_namespace().to_contexts()).parse_argv(argv)  # ParseError on unknown task/flag
    assert [c.name for c in parsed][0] == argv[0]


def test_the_checker_rejects_an_unknown_flag():
    from invoke.exceptions import ParseError

    with pytest.raises(ParseError):
        Parser(contexts=tasks_namespace().to_contexts()).parse_argv(["pipeline.run", "pr", "--varient", "cpu"])


# ------------------------------------------------------------------ what the issue asks of each workflow


def test_gpu_smoke_matrix_covers_every_gpu_variant_on_self_hosted_gpu_runners():
    wf = load(ROOT / ".github/workflows/gpu-smoke.yml")
    job = wf["jobs"]["smoke"]
    variants = yaml.safe_load((ROOT / "images/variants.yaml").read_text())["variants"]
    assert sorted(job["strategy"]["matrix"]["variant"]) == sorted(n for n, v in variants.items() if v["device"] == "gpu")
    assert job["runs-on"] == ["self-hosted", "linux", "x64", "gpu"]
    assert set(wf["on"]["pull_request"]["paths"]) >= {"images/**", "smoke/**"} and "schedule" in wf["on"]
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    assert "invoke pipeline.run pr --variant ${{ matrix.variant }}" in runs
    assert "CUDA_VISIBLE_DEVICES" in runs and "NVIDIA_VISIBLE_DEVICES" in runs
    assert job["steps"][-1]["if"] == "always()" and "chown" in job["steps"][-1]["run"]
    uses = [s.get("uses", "") for s in job["steps"]]
    assert any(u.startswith("actions/upload-artifact@") for u in uses)
    assert any(u.startswith("mikepenz/action-junit-report@") for u in uses)


def test_release_runs_the_release_pipeline_behind_the_release_environment():
    wf = load(ROOT / ".github/workflows/release.yml")
    assert {"version", "variant"} <= set(wf["on"]["workflow_dispatch"]["inputs"])
    gated = [j for j in wf["jobs"].values() if j.get("environment") == "release"]
    assert gated and any("invoke pipeline.run release" in s.get("run", "") for j in gated for s in j["steps"])


def test_ci_runs_lint_and_the_suite_like_ci_run():
    wf = load(ROOT / ".github/workflows/ci.yml")
    runs = "\n".join(s.get("run", "") for j in wf["jobs"].values() for s in j["steps"])
    assert "pull_request" in wf["on"]
    assert all(t in runs for t in ("ruff check", "actionlint", "hadolint", "bash scripts/test.sh"))
    assert "bash scripts/test.sh" in (ROOT / ".ci/run").read_text()


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_secrets_only_through_env_and_actions_pinned(path):
    wf = load(path)
    for job in wf["jobs"].values():
        for step in job.get("steps", []):
            assert "secrets." not in step.get("run", ""), f"{path.name}: a secret expanded into a script: {step}"
            assert not re.search(r"echo\s+\"?\$\{?(PADDLECD_REGISTRY_PASSWORD|AWS_SECRET_ACCESS_KEY|KUBECONFIG_DATA)",
                                 step.get("run", "")), f"{path.name}: a secret echoed"
            if "uses" in step:
                assert re.search(r"@(v\d+|[0-9a-f]{40})", step["uses"]), f"{path.name}: unpinned {step['uses']}"
    text = path.read_text()
    assert "docker login" not in text or "--password-stdin" in text

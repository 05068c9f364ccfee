"""The GitHub Actions workflows are checked here: actionlint (with shellcheck when
installed), hadolint on the Dockerfiles, every `invoke` command they run exists with the flags they
pass, and the rules the issue sets (GPU matrix, approval environment, secrets only through env,
pinned actions)."""

from __future__ import annotations

import importlib.util
import json
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
    return subprocess.run(
        [str(BIN / name), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_workflows_exist():
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "gpu-smoke.yml", "release.yml"}


def test_actionlint_is_clean():
    r = tool("actionlint", "-no-color", "-config-file", ".github/actionlint.yaml",
             *[str(p.relative_to(ROOT)) for p in WORKFLOWS])
    assert r.returncode == 0, r.stdout + r.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path):
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "bad.yml").write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo "
        "${{ matrix.nope }}\n"
    )
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
    """Replace ``${{ … }}`` by a value (``format('--flag {0}', …)`` keeps its flag) and ``$VAR`` by
    env."""

    def expr(m):
        flags = re.findall(r"format\('([^']*)\{0\}'", m.group(1))
        return " ".join(f + "X" for f in flags) if flags else "X"

    text = re.sub(r"\$\{\{(.*?)\}\}", expr, text, flags=re.S)
    return re.sub(
        r"\$\{?([A-Z_][A-Z0-9_]*)\}?", lambda m: expand(env.get(m.group(1), "X"), env), text
    )


def expand_arrays(script: str) -> str:
    """Replace ``"${name[@]}"`` by every word ever put in the bash array ``name`` (``name=(…)``,
    ``name+=(…)``), so each flag a script may pass is checked."""
    words: dict[str, list[str]] = {}
    for name, body in re.findall(r"\b([a-z_][a-z0-9_]*)\+?=\(([^)]*)\)", script):
        words.setdefault(name, []).append(body)
    return re.sub(
        r'"\$\{([a-z_][a-z0-9_]*)\[@\]\}"', lambda m: " ".join(words.get(m.group(1), [])), script
    )


def invoke_commands():
    for path in WORKFLOWS:
        wf = load(path)
        for job_name, job in wf["jobs"].items():
            for step in job.get("steps", []):
                env = {**(wf.get("env") or {}), **(job.get("env") or {}), **(step.get("env") or {})}
                for line in expand_arrays(step.get("run") or "").splitlines():
                    if line.strip().startswith("invoke "):
                        yield f"{path.name}:{job_name}", shlex.split(expand(line.strip(), env))[1:]


COMMANDS = list(invoke_commands())


def test_workflows_call_invoke():
    called = {argv[0] for _, argv in COMMANDS}
    assert {"pipeline.run", "doctor", "promote"} <= called


@pytest.mark.parametrize("where,argv", COMMANDS, ids=[f"{w}:{' '.join(a)}" for w, a in COMMANDS])
def test_every_invoke_command_exists_with_its_flags(where, argv):
    parsed = Parser(contexts=tasks_namespace().to_contexts()).parse_argv(
        argv
    )  # ParseError on unknown task/flag
    assert [c.name for c in parsed][0] == argv[0]


def test_the_checker_rejects_an_unknown_flag():
    from invoke.exceptions import ParseError

    with pytest.raises(ParseError):
        Parser(contexts=tasks_namespace().to_contexts()).parse_argv(
            ["pipeline.run", "pr", "--varient", "cpu"]
        )


# ------------------------------------------------------------------ what the issue asks of each
# workflow


def test_gpu_smoke_matrix_covers_every_gpu_variant_on_self_hosted_gpu_runners():
    wf = load(ROOT / ".github/workflows/gpu-smoke.yml")
    job = wf["jobs"]["smoke"]
    variants = yaml.safe_load((ROOT / "images/variants.yaml").read_text())["variants"]
    assert sorted(job["strategy"]["matrix"]["variant"]) == sorted(
        n for n, v in variants.items() if v["device"] == "gpu"
    )
    assert job["runs-on"] == ["self-hosted", "linux", "x64", "gpu"]
    assert (
        set(wf["on"]["pull_request"]["paths"]) >= {"images/**", "smoke/**"}
        and "schedule" in wf["on"]
    )
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    assert 'invoke pipeline.run pr --variant "$VARIANT"' in runs
    assert job["env"]["VARIANT"] == "${{ matrix.variant }}"
    assert "CUDA_VISIBLE_DEVICES" in runs and "NVIDIA_VISIBLE_DEVICES" in runs
    assert job["steps"][-1]["if"] == "always()" and "chown" in job["steps"][-1]["run"]
    uses = [s.get("uses", "") for s in job["steps"]]
    assert any(u.startswith("actions/upload-artifact@") for u in uses)
    assert any(u.startswith("mikepenz/action-junit-report@") for u in uses)


def test_release_runs_the_release_pipeline_behind_the_release_environment():
    wf = load(ROOT / ".github/workflows/release.yml")
    assert {"version", "variant"} <= set(wf["on"]["workflow_dispatch"]["inputs"])
    gated = [j for j in wf["jobs"].values() if j.get("environment") == "release"]
    assert gated and any(
        "invoke pipeline.run release" in s.get("run", "") for j in gated for s in j["steps"]
    )


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
            assert "secrets." not in step.get(
                "run", ""
            ), f"{path.name}: a secret expanded into a script: {step}"
            assert not re.search(
                r"echo\s+\"?\$\{?(PADDLECD_REGISTRY_PASSWORD|AWS_SECRET_ACCESS_KEY|KUBECONFIG_DATA)",
                step.get("run", ""),
            ), f"{path.name}: a secret echoed"
    text = path.read_text()
    assert "docker login" not in text or "--password-stdin" in text


# ------------------------------------------------------------------ workflows not
# injectable

# Contexts a workflow's caller or a pull request's author controls (GitHub's "script injection"
# list).
UNTRUSTED = re.compile(r"\$\{\{[^}]*\b(inputs\.|github\.event\.|github\.head_ref)")
THIRD_PARTY_USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>[^\s#]+)(?P<rest>.*)$")


def scripts(wf: dict):
    for job_name, job in wf["jobs"].items():
        for step in job.get("steps", []):
            if "run" in step:
                yield job_name, step


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_untrusted_expression_is_expanded_inside_a_script(path):
    bad = [
        (job, s.get("name", s["run"][:40]))
        for job, s in scripts(load(path))
        if UNTRUSTED.search(s["run"])
    ]
    assert not bad, f"{path.name}: pass these through env instead: {bad}"


def test_the_expression_rule_catches_an_injectable_script():
    wf = yaml.safe_load(
        "jobs:\n  a:\n    steps:\n      - run: invoke promote --version ${{ inputs.version }}\n"
        "      - run: echo ${{github.event.pull_request.title}}\n"
    )
    assert len([s for _, s in scripts(wf) if UNTRUSTED.search(s["run"])]) == 2


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_job_has_a_timeout_and_its_own_permissions(path):
    wf = load(path)
    assert wf.get("permissions") == {}, f"{path.name}: grant nothing at the top, per job instead"
    for name, job in wf["jobs"].items():
        assert isinstance(
            job.get("timeout-minutes"), int
        ), f"{path.name}:{name} has no timeout-minutes"
        assert "permissions" in job, f"{path.name}:{name} does not say which permissions it needs"
        assert job["permissions"] != "write-all" and "pull-requests" not in job["permissions"], \
            f"{path.name}:{name}: no step comments on pull requests"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_third_party_actions_are_pinned_by_commit_sha_with_the_tag_in_a_comment(path):
    found = 0
    for line in path.read_text().splitlines():
        m = THIRD_PARTY_USES.match(line)
        if not m or m["ref"].startswith(("./", "docker://")):
            continue
        found += 1
        assert re.fullmatch(
            r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", m["ref"]
        ), f"{path.name}: not SHA-pinned: {line}"
        assert re.fullmatch(
            r"\s*#\s*v\d+(\.\d+)*\s*", m["rest"]
        ), f"{path.name}: no '# vX.Y.Z': {line}"
    assert found, f"{path.name}: no actions found (the pattern is wrong)"


def test_dependabot_watches_actions_and_pip():
    config = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text())
    assert config["version"] == 2
    assert {u["package-ecosystem"] for u in config["updates"]} >= {"github-actions", "pip"}


def release_step(job: str, name: str | None = None) -> str:
    steps = load(ROOT / ".github/workflows/release.yml")["jobs"][job]["steps"]
    return next(s["run"] for s in steps if "run" in s and (name is None or s.get("name") == name))


GOOD_INPUTS = {"INPUT_VARIANT": "cu126", "INPUT_VERSION": "1.4.0", "INPUT_BUMP": "none",
               "INPUT_DIGEST": "sha256:" + "a" * 64}


def run_bash(script: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("given", [
    {}, {"INPUT_VERSION": "1.5.0-rc.1"}, {"INPUT_VERSION": "", "INPUT_BUMP": "minor"},
], ids=["version", "pre-release", "bump"])
def test_release_input_check_accepts_good_inputs(given, tmp_path):
    r = run_bash(release_step("inputs"), {**GOOD_INPUTS, **given}, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize(
    "given",
    [
        {"INPUT_VERSION": "1.4.0 --force --reason x"},
        {"INPUT_VERSION": "v1.4.0"},
        {"INPUT_VERSION": "1.4"},
        {"INPUT_VERSION": "01.2.3"},
        {"INPUT_VERSION": "1.4.0+build.1"},
        {"INPUT_VERSION": "1.4.0\n--force"},
        {"INPUT_VERSION": "1.4.0", "INPUT_BUMP": "patch"},
        {"INPUT_VERSION": "", "INPUT_BUMP": "none"},
        {"INPUT_VERSION": "", "INPUT_BUMP": "patch --force"},
        {"INPUT_DIGEST": "sha256:abc"},
        {"INPUT_DIGEST": "sha256:" + "a" * 64 + " --force"},
        {"INPUT_DIGEST": "sha256:" + "A" * 64},
        {"INPUT_VARIANT": "cpu --force"},
        {"INPUT_VARIANT": "$(id)"},
        {
            "INPUT_DIGEST": ""
        },  # the digest is required; its attestation is in the registry
    ],
    ids=lambda g: repr(g)[:50],
)
def test_release_input_check_refuses_flags_and_malformed_values(given, tmp_path):
    r = run_bash(release_step("inputs"), {**GOOD_INPUTS, **given}, tmp_path)
    assert r.returncode == 1 and "::error" in r.stdout, r.stdout + r.stderr
    assert all(
        v not in r.stdout for v in given.values() if len(v) > 8
    ), "the message echoed an input"


@pytest.mark.parametrize("job,name", [("plan", "plan (dry run)"),
                                      ("promote", "release pipeline (promote, deploy, upload)")])
def test_release_scripts_pass_each_input_as_one_argument(job, name, tmp_path):
    """Even a value the check would refuse reaches invoke as one word bound to its flag."""
    log = tmp_path / "argv.jsonl"
    fake = tmp_path / "invoke"
    fake.write_text("#!/usr/bin/env python3\nimport json, sys\n"
                    f'open("{log}", "a").write(json.dumps(sys.argv[1:]) + "\\n")\n')
    fake.chmod(0o755)
    env = {
        **GOOD_INPUTS,
        "INPUT_VERSION": "1.4.0 --force --reason x",
        "INPUT_DIGEST": "",
        "INPUT_BUMP": "none",
    }
    r = run_bash(release_step(job, name), env, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls and all(
        "--version=1.4.0 --force --reason x" in argv and "--force" not in argv for argv in calls
    )
    assert all("--variant=cu126" in argv for argv in calls), calls


def _trusted_keys_steps() -> list[tuple[str, str]]:
    wf = load(ROOT / ".github/workflows/release.yml")
    return [(name, s["run"]) for name, j in wf["jobs"].items() for s in j["steps"]
            if s.get("name") == "trusted keys"]


def test_release_jobs_that_promote_check_the_trusted_keys_first():
    """The plan and promote jobs stop before paddlecd runs when the trusted-keys folder
    holds no *.pub; each job checks before its first invoke."""
    wf = load(ROOT / ".github/workflows/release.yml")
    for name, job in wf["jobs"].items():
        runs = [s.get("name") or s.get("run", "") for s in job["steps"]]
        first_invoke = next((i for i, r in enumerate(runs) if "invoke " in r), None)
        if first_invoke is not None:
            assert "trusted keys" in runs[:first_invoke], name
    assert len(_trusted_keys_steps()) == 2


@pytest.mark.parametrize("case", ["empty", "missing", "readme only", "one key", "file"])
def test_the_trusted_keys_step_fails_in_one_line_naming_the_folder(tmp_path, case):
    folder = tmp_path / "attestation-keys"
    if case != "missing":
        folder.mkdir()
    if case == "readme only":
        (folder / "README.md").write_text("how to add a key\n")
    if case == "one key":
        (folder / "gpu-smoke.pub").write_text("-----BEGIN PUBLIC KEY-----\n")
    target = folder / "gpu-smoke.pub" if case == "file" else folder
    if case == "file":
        target.write_text("-----BEGIN PUBLIC KEY-----\n")
    for _, script in _trusted_keys_steps():
        env = {"PADDLECD_RELEASE_TRUSTED_KEYS": str(target), "PATH": "/usr/bin:/bin"}
        r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30,
                           env=env)
        if case in ("one key", "file"):
            assert (r.returncode, r.stdout) == (0, ""), r.stdout + r.stderr
            continue
        lines = r.stdout.splitlines()
        assert r.returncode == 1 and len(lines) == 1, r.stdout + r.stderr
        assert lines[0].startswith("::error title=trusted keys::") and str(folder) in lines[0]
        assert "invoke evidence.keygen" in lines[0] and "attestation-keys/README.md" in lines[0]


def test_the_default_trusted_keys_folder_says_how_to_add_a_key():
    readme = (ROOT / ".github/attestation-keys/README.md").read_text()
    assert "invoke evidence.keygen --out" in readme and "PADDLECD_SIGNING_KEY" in readme
    assert not list((ROOT / ".github/attestation-keys").glob("*.key"))


# ------------------------------------------------------------------ repository variables: an
# unset one expands to "", and paddlecd refuses an empty setting (found by running the release
# workflow with act: tests/integration/test_workflows_act.py)
SETTINGS_STEP = "settings from repository variables"
BARE_VAR = re.compile(r"^\$\{\{\s*vars\.\w+\s*\}\}$")


def _settings_steps():
    for path in WORKFLOWS:
        for job_name, job in load(path)["jobs"].items():
            for step in job.get("steps", []):
                if step.get("name") == SETTINGS_STEP:
                    yield f"{path.name}:{job_name}", step


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_a_variable_without_a_default_reaches_env_only_through_the_settings_step(path):
    wf = load(path)
    envs = [("workflow", wf.get("env") or {})]
    for name, job in wf["jobs"].items():
        envs.append((name, job.get("env") or {}))
        envs += [(f"{name}: {s.get('name', '')}", s.get("env") or {}) for s in job.get("steps", [])
                 if s.get("name") != SETTINGS_STEP]
    bare = [(where, k) for where, env in envs for k, v in env.items()
            if BARE_VAR.match(str(v).strip())]
    assert not bare, f"{path.name}: move these into a '{SETTINGS_STEP}' step: {bare}"


def test_the_settings_step_exports_only_the_variables_that_are_set(tmp_path):
    steps = list(_settings_steps())
    assert {w for w, _ in steps} == {"gpu-smoke.yml:smoke", "release.yml:plan",
                                     "release.yml:promote"}
    for where, step in steps:
        names = [k for k in step["env"] if k.startswith("SET_")]
        assert names == list(step["env"]), where
        env_file = tmp_path / f"{where}.env"
        given = {n: ("" if i % 2 else f"value-{i} with spaces") for i, n in enumerate(names)}
        r = run_bash(step["run"], {**given, "GITHUB_ENV": str(env_file)}, tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        assert sorted(env_file.read_text().splitlines()) == sorted(
            f"{n[len('SET_'):]}={v}" for n, v in given.items() if v), where
        two_lines = run_bash(step["run"], {names[0]: "a\nB=b", "GITHUB_ENV": str(env_file)},
                             tmp_path)
        assert two_lines.returncode == 1 and names[0][len("SET_"):] in two_lines.stdout
        assert "a\nB=b" not in two_lines.stdout

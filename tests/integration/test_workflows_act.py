"""The GitHub workflows (.github/workflows) run by a real runner: `act` in host mode, offline, in a
clone of the checkout under the test's temp dir (support/act.py).

What act does not do, for every test here: it ignores environment approvals (``environment:``),
``permissions:`` (no GITHUB_TOKEN scopes exist) and ``concurrency:`` groups, and it does not
enforce required or ``choice`` inputs. Secrets given with ``-s`` are masked in the log as GitHub
masks them. Each test says what else GitHub would do differently.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import PASSWORD, USER

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
    assert f"1.4.0-cpu  {digest}" in run.output("promote")  # the ledger step
    assert PASSWORD not in plan.text() + run.text()

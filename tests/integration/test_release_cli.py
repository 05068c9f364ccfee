"""The release tasks as users run them (`invoke promote …`), against the real TLS + auth
registry."""

from __future__ import annotations

import json
import os
import subprocess

from test_release import Project

from support import INVOKE, ROOT, invoke


def _run(project: Project, *args: str) -> subprocess.CompletedProcess:
    """``invoke *args`` in this process's environment (``registry_env``) with the project's state,
    repositories and keys."""
    return invoke(*args, timeout=300, **project.env())


def test_promote_cli_plan_confirm_write_list(registry_env, tmp_path):
    p = Project(tmp_path)
    digest = p.candidate()
    plan_only = _run(p, "promote", "--variant", "cpu", "--version", "1.4.0")
    assert plan_only.returncode == 2, plan_only.stderr
    assert "latest-cpu" in plan_only.stderr and "--yes" in plan_only.stderr  # the plan: stderr
    dry = _run(p, "promote", "--variant", "cpu", "--version", "1.4.0", "--dry-run")
    assert dry.returncode == 0 and "dry run: nothing written" in dry.stderr
    assert p.tag("1.4.0-cpu") is None
    done = _run(p, "promote", "--variant", "cpu", "--version", "1.4.0", "--yes")
    assert done.returncode == 0, done.stderr
    assert p.tag("latest-cpu") == digest
    listed = _run(p, "release.list")
    assert listed.returncode == 0 and f"1.4.0-cpu  {digest}" in listed.stdout
    as_json = _run(p, "release.list", "--variant", "cpu", "--json")
    [row] = json.loads(as_json.stdout)
    assert row["release"]["digest"] == digest and "latest-cpu" in row["moving_tags"]
    for out in (plan_only, dry, done, listed):
        assert "s3cret-Pa55" not in out.stdout + out.stderr
    # a re-run writes nothing and checks no evidence, and says so (it said "promoted")
    again = _run(p, "promote", "--variant", "cpu", "--version", "1.4.0", "--yes")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"already released 1.4.0-cpu = {digest}")
    assert "the evidence is not re-checked" in again.stderr


def test_promote_cli_json_is_the_release(registry_env, tmp_path):
    """--json puts exactly one document on stdout — the plan on --dry-run, the release
    after --yes, the same release (record found in the ledger, nothing written) on a re-run."""
    p = Project(tmp_path)
    digest = p.candidate()
    args = ("promote", "--variant", "cpu", "--version", "1.4.0", "--json")
    dry = _run(p, *args, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["executed"] is False and plan["written"] == [] and plan["record"] is None
    assert {w["tag"] for w in plan["planned"]} == {"1.4.0-cpu", "1.4-cpu", "1-cpu", "latest-cpu"}
    assert "latest-cpu" in dry.stderr and p.tag("1.4.0-cpu") is None  # the plan is on stderr
    done = _run(p, *args, "--yes")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    [record] = p.records()
    assert doc["release"] == "1.4.0-cpu" and doc["digest"] == digest and doc["executed"] is True
    assert doc["reference"] == f"{p.settings.release_repo}@{digest}"
    assert sorted(doc["written"]) == ["1-cpu", "1.4-cpu", "1.4.0-cpu", "latest-cpu"]
    assert doc["record"] == record.id and record.attestation
    assert doc["attestation"] == record.attestation
    again = json.loads(_run(p, *args, "--yes").stdout)
    assert again["written"] == [] and again["record"] == record.id
    refused = _run(p, "promote", "--variant", "cpu", "--version", "1.5.0", "--json")  # no --yes
    assert refused.returncode == 2 and refused.stdout == "" and "--yes" in refused.stderr


def test_promote_cli_bad_input_exit_codes(registry_env, tmp_path):
    p = Project(tmp_path)
    p.candidate(passed=False)
    bad = _run(p, "promote", "--variant", "cpu", "--version", "v1.4", "--yes")
    assert bad.returncode == 2 and "invalid version 'v1.4'" in bad.stderr and "hint:" in bad.stderr
    refused = _run(p, "promote", "--variant", "cpu", "--version", "1.4.0", "--yes")
    assert refused.returncode == 7 and "attested run" in refused.stderr
    assert "failed" in refused.stderr
    assert p.client.list_tags(p.settings.release.repository) == []


def test_two_promote_processes_at_once(registry_env, tmp_path):
    """Two `invoke promote` processes of one variant, one state folder (serialised by its lock
    file)."""
    p = Project(tmp_path)
    digests = {"1.4.0": p.candidate(), "1.5.0": p.candidate()}
    env = {**os.environ, **p.env()}
    procs = [
        subprocess.Popen(
            [INVOKE, "promote", "--variant", "cpu", "--version", v, "--digest", d, "--yes"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for v, d in digests.items()
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert sorted(r.version for r in p.records()) == ["1.4.0", "1.5.0"]
    assert p.tag("latest-cpu") == p.tag("1-cpu") == digests["1.5.0"]
    assert p.tag("1.4-cpu") == digests["1.4.0"]

"""The release tasks as users run them (`invoke promote …`), against the real TLS + auth registry."""

from __future__ import annotations

import os
import subprocess

from test_release import Project

from support import INVOKE, ROOT, invoke


def _run(project: Project, *args: str) -> subprocess.CompletedProcess:
    """``invoke *args`` in this process's environment (``registry_env``) with the project's state
    and repositories."""
    return invoke(*args, timeout=300, PADDLECD_STATE_DIR=project.flags["state_dir"],
                  PADDLECD_REGISTRY_REPOSITORY=project.flags["registry.repository"],
                  PADDLECD_RELEASE_REPOSITORY=project.flags["release.repository"])


def test_promote_cli_plan_confirm_write_list(registry_env, tmp_path):
    p = Project(tmp_path)
    digest = p.candidate()
    plan_only = _run(p, "promote", "--variant", "cpu", "--version", "1.4.0")
    assert plan_only.returncode == 2, plan_only.stderr
    assert "latest-cpu" in plan_only.stdout and "--yes" in plan_only.stderr
    dry = _run(p, "promote", "--variant", "cpu", "--version", "1.4.0", "--dry-run")
    assert dry.returncode == 0 and "dry run: nothing written" in dry.stdout
    assert p.tag("1.4.0-cpu") is None
    done = _run(p, "promote", "--variant", "cpu", "--version", "1.4.0", "--yes")
    assert done.returncode == 0, done.stderr
    assert p.tag("latest-cpu") == digest
    listed = _run(p, "release.list")
    assert listed.returncode == 0 and f"1.4.0-cpu  {digest}" in listed.stdout
    for out in (plan_only, dry, done, listed):
        assert "s3cret-Pa55" not in out.stdout + out.stderr


def test_promote_cli_bad_input_exit_codes(registry_env, tmp_path):
    p = Project(tmp_path)
    p.candidate(passed=False)
    bad = _run(p, "promote", "--variant", "cpu", "--version", "v1.4", "--yes")
    assert bad.returncode == 2 and "invalid version 'v1.4'" in bad.stderr and "hint:" in bad.stderr
    refused = _run(p, "promote", "--variant", "cpu", "--version", "1.4.0", "--yes")
    assert refused.returncode == 7 and "is failing" in refused.stderr
    assert p.client.list_tags(p.settings.release.repository) == []


def test_two_promote_processes_at_once(registry_env, tmp_path):
    """Two `invoke promote` processes of one variant, one state folder (serialised by its lock file)."""
    p = Project(tmp_path)
    digests = {"1.4.0": p.candidate(), "1.5.0": p.candidate()}
    env = {**os.environ, "PADDLECD_STATE_DIR": p.flags["state_dir"],
           "PADDLECD_REGISTRY_REPOSITORY": p.flags["registry.repository"],
           "PADDLECD_RELEASE_REPOSITORY": p.flags["release.repository"]}
    procs = [subprocess.Popen([INVOKE, "promote", "--variant", "cpu", "--version", v, "--digest", d, "--yes"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for v, d in digests.items()]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert sorted(r.version for r in p.records()) == ["1.4.0", "1.5.0"]
    assert p.tag("latest-cpu") == p.tag("1-cpu") == digests["1.5.0"]
    assert p.tag("1.4-cpu") == digests["1.4.0"]

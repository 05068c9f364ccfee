"""scripts/stack.sh's venv step reinstalls only when pyproject.toml's content changed, not its
mtime (found in the trial: a new worktree or branch switch reinstalled into the venv). The
function runs as written, in a temporary project whose ``python3`` only records that it ran."""

from __future__ import annotations

import os
import subprocess
import time

from support import ROOT


def _make_venv(project, bin_dir) -> str:
    body = (ROOT / "scripts" / "stack.sh").read_text()
    start = body.index("make_venv() {")
    function = body[start : body.index("\n}\n", start) + 3]
    script = f'set -euo pipefail\nSTATE=$PWD/.state\nlog() {{ echo "$*"; }}\n{function}make_venv\n'
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", script], cwd=project, env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout


def test_reinstalls_on_a_content_change_only(tmp_path):
    project, bin_dir = tmp_path / "p", tmp_path / "bin"
    (project / ".venv" / "bin").mkdir(parents=True)
    bin_dir.mkdir()
    for tool in (bin_dir / "python3", project / ".venv" / "bin" / "pip"):
        tool.write_text("#!/bin/sh\necho ran >> \"$(dirname \"$0\")/calls\"\n")
        tool.chmod(0o755)
    (project / ".venv" / "bin" / "invoke").write_text("#!/bin/sh\n")
    (project / ".venv" / "bin" / "invoke").chmod(0o755)
    pyproject = project / "pyproject.toml"
    pyproject.write_text("[project]\nname = 'x'\n")
    assert "installing" in _make_venv(project, bin_dir)  # no record yet
    time.sleep(0.01)
    os.utime(pyproject)  # what a checkout does: newer, same bytes
    assert _make_venv(project, bin_dir) == ""
    pyproject.write_text("[project]\nname = 'x'\ndependencies = ['y']\n")
    assert "installing" in _make_venv(project, bin_dir)

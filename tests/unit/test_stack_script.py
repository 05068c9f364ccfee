"""scripts/stack.sh's functions as written (and demo.sh's step()): the venv step reinstalls only
when pyproject.toml's content changed, not its mtime (found in the trial: a new worktree or branch
switch reinstalled into the venv); a function runs in a temporary project whose tools only record
that they ran. Their lines are bold on a terminal only."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
import time

import pytest

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
    for tool in (bin_dir / "python3", *(project / ".venv" / "bin" / t for t in ("pip", "uv"))):
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


def _install_node(project, bin_dir, node_dir) -> str:
    body = (ROOT / "scripts" / "stack.sh").read_text()
    start = body.index("NODE_DIR=")
    function = body[start : body.index("\n}\n", start) + 3]
    script = (f'set -euo pipefail\nROOT=$PWD\nSTATE=$PWD/.state\nSUDO=""\nmkdir -p "$STATE"\n'
              f'log() {{ echo "$*"; }}\napt_install() {{ :; }}\nnode_packages() {{ :; }}\n'
              f'{function}install_node\n')
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "PADDLECD_NODE_DIR": str(node_dir)}
    done = subprocess.run(["bash", "-c", script], cwd=project, env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout


def test_npm_packages_install_once_pinned_and_without_a_prompt(tmp_path):
    project, bin_dir, node_dir = tmp_path / "p", tmp_path / "bin", tmp_path / "node"
    project.mkdir()
    bin_dir.mkdir()
    npm = bin_dir / "npm"
    npm.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/npm-calls\n')
    npm.chmod(0o755)
    assert "installing @sigstore/verify@4.1.3" in _install_node(project, bin_dir, node_dir)
    assert _install_node(project, bin_dir, node_dir) == ""  # installed: not asked again
    [call] = (tmp_path / "npm-calls").read_text().splitlines()
    assert f"--prefix {node_dir}" in call and "--yes" in call and "--save-exact" in call
    assert all(f"@{v}" in call for v in ("4.1.3", "5.0.1", "4.0.1", "0.5.2"))


def test_missing_npm_packages_fail_under_ci_and_skip_elsewhere(tmp_path, monkeypatch):
    from _pytest.outcomes import Failed, Skipped

    from support import sigstore_js

    monkeypatch.setenv("PADDLECD_NODE_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(Failed, match="scripts/stack.sh node"):
        sigstore_js.node_modules()
    monkeypatch.setenv("CI", "")
    with pytest.raises(Skipped):
        sigstore_js.node_modules()


def _engine_tier(tmp_path, present: tuple[str, ...], *, python: bool = False) -> list[str]:
    """Run ``engine_tier`` as written, on a PATH that holds only ``present`` (as empty commands),
    this machine's ``python3`` when ``python``, and an ``apt-get``, ``make_venv``,
    ``start_dockerd`` and ``install_node`` that only record that they ran; returns the records in
    order."""
    body = (ROOT / "scripts" / "stack.sh").read_text()
    functions = body[: body.index('\n# an empty command is refused')]
    functions = functions.replace("source scripts/terminal.sh\n", "")  # log() is replaced below
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    (bin_dir / "apt-get").write_text(f"#!/bin/sh\necho apt-get \"$@\" >> {calls}\n")
    for name in present:
        (bin_dir / name).write_text("#!/bin/sh\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    for real in ("env", "mkdir", "dirname", "cat", "sha256sum", "cut"):
        (bin_dir / real).symlink_to(shutil.which(real))
    if python:  # the interpreter itself (a pyenv shim needs more than this PATH)
        (bin_dir / "python3").symlink_to(os.path.realpath(sys.executable))
    (tmp_path / "p").mkdir()
    script = (f"{functions}\nSUDO=''\nlog() {{ echo \"$*\"; }}\n"
              f"start_dockerd() {{ echo dockerd >> {calls}; }}\n"
              f"make_venv() {{ echo venv >> {calls}; }}\n"
              f"install_node() {{ echo node >> {calls}; }}\nengine_tier\n")
    subprocess.run(["/bin/bash", "-c", script], cwd=tmp_path / "p", env={"PATH": str(bin_dir)},
                   check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    return calls.read_text().splitlines()


def test_the_engine_tier_asks_apt_once_for_every_missing_package(tmp_path):
    """`stack.sh engine` (what .ci/run calls) gathers what Docker, the registry, Ceph's RGW,
    podman and node lack into one index update and one install without recommends (three in a
    row cost a fresh machine their updates twice over); what a machine has is not asked for.
    Without python3 and node the venv and the npm packages wait for apt."""
    calls = _engine_tier(tmp_path, present=("ceph-osd", "skopeo", "netavark", "aardvark-dns"))
    apt = [c for c in calls if c.startswith("apt-get")]
    assert apt == ["apt-get -o DPkg::Lock::Timeout=300 update -qq",
                   "apt-get install -y -qq -o DPkg::Lock::Timeout=300 --no-install-recommends "
                   "docker.io docker-registry debootstrap openssl python3-venv ceph-mon radosgw "
                   "podman nodejs npm"]
    assert calls.index("venv") > calls.index(apt[1]) and calls.index("node") > calls.index(apt[1])
    assert "dockerd" in calls


def test_the_engine_tier_on_a_machine_with_everything_asks_apt_nothing(tmp_path):
    present = ("dockerd", "docker-registry", "debootstrap", "skopeo", "openssl", "ceph-mon",
               "ceph-osd", "radosgw", "podman", "netavark", "aardvark-dns", "node", "npm")
    calls = _engine_tier(tmp_path, present=present, python=True)
    assert not [c for c in calls if c.startswith("apt-get")]
    assert {"dockerd", "venv", "node"} <= set(calls)


def _printed(script: str, function: str, *, terminal: bool, env: dict[str, str]) -> bytes:
    """What ``function hello`` prints, as defined in ``scripts/<script>`` (its one-line definition
    after sourcing scripts/terminal.sh), with stdout a pseudo-terminal or a pipe."""
    body = (ROOT / "scripts" / script).read_text()
    start = body.index(f"\n{function}() {{") + 1
    line = body[start : body.index("\n", start)]
    command = ["bash", "-c", f"source scripts/terminal.sh\n{line}\n{function} hello"]
    env = {"PATH": os.environ["PATH"], **env}
    if not terminal:
        return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, check=True).stdout
    leader, follower = pty.openpty()
    try:
        subprocess.run(command, cwd=ROOT, env=env, stdout=follower, check=True)
        os.close(follower)
        follower = -1
        out = b""
        while chunk := _read(leader):
            out += chunk
        return out.replace(b"\r\n", b"\n")
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 4096)
    except OSError:  # EIO: the pseudo-terminal's other end is closed and drained (Linux)
        return b""


@pytest.mark.parametrize(("script", "function", "plain"), [
    ("stack.sh", "log", b"[stack] hello\n"), ("demo.sh", "step", b"==> hello\n")])
def test_bold_only_on_a_terminal(script, function, plain):
    """stack.sh's log() and demo.sh's step() are bold on a terminal; in a pipe, a file or a CI
    log (CI=true, TERM=dumb) the same line has no control codes."""
    term = {"TERM": "xterm"}
    assert _printed(script, function, terminal=False, env=term) == plain
    assert _printed(script, function, terminal=True, env={**term, "CI": "true"}) == plain
    assert _printed(script, function, terminal=True, env={"TERM": "dumb"}) == plain
    bold = _printed(script, function, terminal=True, env=term)
    assert bold.startswith(b"\x1b[1m") and bold.replace(b"\x1b[1m", b"").replace(
        b"\x1b[0m", b"") == plain


def test_the_registry_daemon_holds_none_of_its_callers_descriptors(tmp_path):
    """`flock LOCK bash scripts/demo.sh` left the lock held after the demo ended: the embedded
    registry start_registry() backgrounds inherited flock's fd (flock(1) --close)."""
    body = (ROOT / "scripts" / "stack.sh").read_text()
    start = body.index("start_registry() {")
    function = body[start : body.index("\n}\n", start) + 3]
    project = tmp_path / "p"
    (project / ".venv" / "bin").mkdir(parents=True)
    fake = project / ".venv" / "bin" / "python"
    # -m: the daemon, records its descriptors then idles; -c: the health check, up once recorded
    fake.write_text('#!/bin/bash\nif [ "$1" = -m ]; then ls /proc/$$/fd > "$PWD/daemon-fds"; '
                    'exec sleep 30; fi\n[ -s "$PWD/daemon-fds" ]\n')
    fake.chmod(0o755)
    lock = open(tmp_path / "held.lock", "w")
    script = (f'set -euo pipefail\nSTATE=$PWD/.state\nlog() {{ echo "$*"; }}\n{function}'
              f'start_registry\n')
    try:
        subprocess.run(["bash", "-c", script], cwd=project, capture_output=True, text=True,
                       check=True, pass_fds=(lock.fileno(),), timeout=20)
        fds = (project / "daemon-fds").read_text().split()
        assert str(lock.fileno()) not in fds
    finally:
        pid = (project / ".state" / "registry" / "pid").read_text().strip()
        subprocess.run(["kill", pid], check=False)
        lock.close()


def test_an_empty_command_is_refused_not_taken_for_up():
    """Trial 7: ``scripts/stack.sh ''`` ran ``up`` (apt, dockerd, the registry)."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "stack.sh"), ""], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 2 and done.stderr.startswith("usage: ") and done.stdout == ""


@pytest.mark.parametrize(("script", "args", "words"), [
    ("stack.sh", ["up", "extra"], "stack.sh takes one command, not 'up extra'"),
    ("demo.sh", ["--dry-run"], "demo.sh takes no arguments (given: --dry-run)"),
])
def test_a_script_refuses_arguments_it_does_not_take(script, args, words):
    """Trial 11: ``demo.sh --dry-run`` ran the whole demo (a build, a push, releases on a fresh
    registry); ``stack.sh up extra`` ran ``up``, the rest unsaid. Each exits 2 at once."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / script), *args], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 2 and done.stderr.startswith(words) and done.stdout == ""

"""The one subprocess helper: combined and stdout-only modes, timeouts, cause and hint on errors."""

from __future__ import annotations

import os
import sys
import time

import pytest

from paddlecd import proc
from paddlecd.errors import ConfigError, EngineError

PY = sys.executable


def test_combined_mode_interleaves_stderr_and_streams_lines():
    seen: list[str] = []
    r = proc.run([PY, "-c", "import sys; print('out', flush=True); print('err', file=sys.stderr)"],
                 on_line=seen.append)
    assert (r.returncode, r.stdout, r.stderr) == (0, "out\nerr", "") and seen == ["out", "err"]


def test_stdout_only_keeps_stderr_apart_for_parsing():
    code = "import sys; print('{\"a\": 1}'); print('warning: x', file=sys.stderr)"
    r = proc.run([PY, "-c", code], stdout_only=True)
    assert r.stdout == '{"a": 1}' and r.stderr == "warning: x" and r.tail == "warning: x"


def test_stdout_only_failure_names_the_last_stderr_line():
    cmd = [PY, "-c", "import sys; print('data'); sys.exit('fatal: not a git repository')"]
    with pytest.raises(ConfigError) as e:
        proc.run(cmd, stdout_only=True, error=ConfigError, what="reading HEAD",
                 hint="run it in a checkout")
    assert e.value.cause == "reading HEAD failed (exit 1): fatal: not a git repository"
    assert e.value.hint == "run it in a checkout"


def test_stdin_reaches_the_command_in_both_modes():
    echo = [PY, "-c", "import sys; print(sys.stdin.read().upper())"]
    assert proc.run(echo, stdin=b"abc", stdout_only=True).stdout == "ABC"
    assert proc.run(echo, stdin=b"abc").stdout == "ABC"


@pytest.mark.parametrize("stdout_only", [False, True])
def test_a_timeout_kills_the_command_and_its_children(stdout_only):
    # the child inherits the pipe: only killing the whole group ends the read
    cmd = [PY, "-c", "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
           "'import time; time.sleep(60)']); print('started', flush=True); time.sleep(60)"]
    started = time.monotonic()
    with pytest.raises(EngineError) as e:
        proc.run(cmd, stdout_only=stdout_only, timeout=1, check=False, what="a stuck probe")
    assert time.monotonic() - started < 20
    assert e.value.cause == "a stuck probe did not finish within 1s (killed)"


def test_check_false_returns_the_status():
    assert proc.run([PY, "-c", "raise SystemExit(3)"], check=False).returncode == 3


def test_a_missing_executable_is_named_with_the_callers_error_type():
    with pytest.raises(ConfigError) as e:
        proc.run(["no-such-tool-paddlecd"], error=ConfigError)
    assert e.value.cause == "executable not found: no-such-tool-paddlecd"


def test_start_runs_a_service_in_the_background_and_stop_ends_it(tmp_path):
    log = tmp_path / "service.log"
    bg = proc.start([PY, "-c", "import time; print('up', flush=True); time.sleep(60)"], log=log)
    deadline = time.monotonic() + 20
    while "up" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert bg.running() and log.read_text() == "up\n"
    bg.stop(grace=5)
    assert not bg.running()


def test_an_owner_is_gone_when_its_process_ended_or_its_pid_was_reused():
    import socket
    import subprocess

    from paddlecd import proc

    me = proc.owner()
    assert me.startswith(f"{socket.gethostname()}/{os.getpid()}/") and not proc.owner_gone(me)
    child = subprocess.Popen(["sleep", "60"])
    label = proc.owner(child.pid)
    assert not proc.owner_gone(label)
    child.kill()
    child.wait()
    assert proc.owner_gone(label)
    host, pid, start = me.split("/")
    assert proc.owner_gone(f"{host}/{pid}/{int(start) + 1}")  # the same pid, another process
    assert not proc.owner_gone(f"other-host/{pid}/1")  # another machine's: never ours to judge
    assert not proc.owner_gone("garbage")

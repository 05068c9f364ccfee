"""The one subprocess helper (STYLE.md §11): every external command of paddlecd runs through here.

It finds the executable up front with a clear error, echoes the command through a callback, checks
the exit status, enforces an optional timeout and keeps stderr (or the tail of combined output) for
the error message. :func:`run` has two modes: combined output (builds, debootstrap: one stream to
show the user) and ``stdout_only`` (git, nvidia-smi, credential helpers: stdout is parsed, stderr is
kept apart for the error). :func:`start` runs a background service (the embedded registry).
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from paddlecd.errors import EngineError, PaddlecdError
from paddlecd.types import Echo


@dataclass(frozen=True)
class Result:
    """A finished command.

    Attributes:
        returncode: the exit status.
        stdout: all of stdout (combined mode: stdout and stderr interleaved), no final newline.
        tail: the last output lines (combined mode) or the last stderr lines (``stdout_only``).
        stderr: all of stderr in ``stdout_only`` mode; empty in combined mode.
    """

    returncode: int
    stdout: str
    tail: str
    stderr: str = ""


def which(name: str, *, hint: str | None = None, error: type[PaddlecdError] = EngineError) -> str:
    """Return the absolute path of executable ``name`` or raise ``error`` naming it, with
    ``hint``."""
    path = name if os.path.isabs(name) and os.access(name, os.X_OK) else shutil.which(name)
    if not path:
        raise error(f"executable not found: {name}", hint or f"install {name} or put it on PATH")
    return path


def run(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    echo: Echo | None = None,
    on_line: Echo | None = None,
    stdin: bytes | None = None,
    check: bool = True,
    stdout_only: bool = False,
    timeout: float | None = None,
    error: type[PaddlecdError] = EngineError,
    what: str | None = None,
    hint: str | None = None,
    tail_lines: int = 30,
) -> Result:
    """Run ``cmd`` and return its :class:`Result`.

    In the default mode stdout and stderr are combined, streamed line by line to ``on_line`` when
    given, else captured. With ``stdout_only`` stdout is captured alone (for parsing) and stderr is
    kept apart for the error message; ``on_line`` is not used. Secrets must never be in ``cmd`` (it
    is echoed): pass them by file, environment or ``stdin``.

    Args:
        cmd: argv; ``cmd[0]`` is resolved with :func:`which` first.
        env: extra environment merged over ``os.environ``.
        echo: receives ``"$ cmd …"`` before the run.
        on_line: receives each output line (without newline) as it arrives (combined mode).
        stdin: bytes written to the command's stdin (closed afterwards); else stdin is /dev/null.
        check: raise ``error`` on a non-zero exit.
        stdout_only: capture stdout alone; stderr goes to :attr:`Result.stderr` and the error.
        timeout: seconds before the command is killed; None waits for ever.
        what: what the command does, for the error ("building cpu image").
        hint: what to do when it fails; default: the tail of its output.

    Raises:
        error: the executable is missing; it ran longer than ``timeout`` (raised even when
            ``check`` is False: there is no exit status to return); or, with ``check``, it exited
            non-zero (the cause names ``what`` or the command and the last line; the hint carries
            the tail).
    """
    argv = [which(cmd[0], error=error), *cmd[1:]]
    if echo:
        echo("$ " + " ".join(cmd))
    group = timeout is not None  # killed as a group: a CLI plugin's child must not keep the pipe
    popen = subprocess.Popen(
        argv, cwd=cwd, env={**os.environ, **(env or {})},
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if stdout_only else subprocess.STDOUT, start_new_session=group,
    )
    killed = threading.Event()
    result = _collect(popen, killed, timeout=timeout, stdin=stdin, on_line=on_line,
                      stdout_only=stdout_only, tail_lines=tail_lines)
    if killed.is_set() and result.returncode == -signal.SIGKILL:
        raise _timed_out(error, what or cmd[0], result, timeout or 0)
    if check and result.returncode != 0:
        raise _failed(error, what or cmd[0], result,
                      hint or ("see the output above" if on_line and not stdout_only
                               else "last output:\n" + result.tail))
    return result


def _timed_out(error: type[PaddlecdError], what: str, result: Result,
               timeout: float) -> PaddlecdError:
    """The error of a command killed at its timeout (there is no exit status to return)."""
    return error(f"{what} did not finish within {timeout:g}s (killed)",
                 "last output:\n" + result.tail if result.tail
                 else "raise the timeout or run it by hand")


def _failed(error: type[PaddlecdError], what: str, result: Result, hint: str) -> PaddlecdError:
    """The error of a non-zero exit: ``what`` failed, with the exit code and its last line."""
    last = next((ln for ln in reversed(result.tail.splitlines()) if ln.strip()), "")
    return error(f"{what} failed (exit {result.returncode}): {last.strip()[:300]}", hint)


def _collect(popen: subprocess.Popen, killed: threading.Event, *, timeout: float | None,
             stdin: bytes | None, on_line: Echo | None, stdout_only: bool,
             tail_lines: int) -> Result:
    """Feed ``stdin`` and read the output of ``popen`` to its end; past ``timeout`` seconds its
    process group is killed (and ``killed`` set)."""
    group = timeout is not None
    timer = threading.Timer(timeout, _kill_group, (popen, killed)) if group else None
    try:
        if timer:
            timer.start()
        if stdout_only:
            return _communicate(popen, stdin, tail_lines)
        return _stream(popen, stdin, on_line, tail_lines)
    except BaseException:  # Ctrl-C or a failing callback: leave nothing running behind
        if group:
            _kill_group(popen, killed)
        raise
    finally:
        if timer:
            timer.cancel()


def _kill_group(popen: subprocess.Popen, killed: threading.Event) -> None:
    killed.set()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(popen.pid, signal.SIGKILL)


def _communicate(popen: subprocess.Popen, stdin: bytes | None, tail_lines: int) -> Result:
    out, err = popen.communicate(stdin)
    stdout = out.decode("utf-8", "replace").removesuffix("\n")
    stderr = err.decode("utf-8", "replace").removesuffix("\n")
    return Result(
        returncode=popen.returncode,
        stdout=stdout,
        tail="\n".join(stderr.splitlines()[-tail_lines:]),
        stderr=stderr,
    )


def _stream(popen: subprocess.Popen, stdin: bytes | None, on_line: Echo | None,
            tail_lines: int) -> Result:
    if stdin is not None:
        assert popen.stdin is not None
        popen.stdin.write(stdin)
        popen.stdin.close()
    assert popen.stdout is not None
    tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
    out: list[str] = []
    for raw in popen.stdout:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        out.append(line)
        tail.append(line)
        if on_line:
            on_line(line)
    return Result(returncode=popen.wait(), stdout="\n".join(out), tail="\n".join(tail))


class Background:
    """A command running in the background in its own session (see :func:`start`)."""

    def __init__(self, popen: subprocess.Popen, log: Path):
        self._popen = popen
        self.log = log

    @property
    def pid(self) -> int:
        """The process id (also its process-group id)."""
        return self._popen.pid

    def running(self) -> bool:
        """True while the process has not exited."""
        return self._popen.poll() is None

    def wait(self) -> int:
        """Block until the process exits; return its exit status."""
        return self._popen.wait()

    def stop(self, *, grace: float = 10) -> None:
        """SIGTERM the process group, then SIGKILL it after ``grace`` seconds; no-op once exited."""
        if not self.running():
            return
        os.killpg(self._popen.pid, signal.SIGTERM)
        try:
            self._popen.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(self._popen.pid, signal.SIGKILL)
            self._popen.wait()


def start(cmd: Sequence[str], *, log: Path, error: type[PaddlecdError] = EngineError,
          hint: str | None = None) -> Background:
    """Start ``cmd`` in the background, in a new session, stdout and stderr appended to ``log``.

    Raises:
        error: the executable is missing (``hint`` says how to install it).
    """
    argv = [which(cmd[0], hint=hint, error=error), *cmd[1:]]
    with open(log, "ab") as fh:  # the child keeps its own descriptor
        popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=fh,
                                 start_new_session=True)
    return Background(popen, log)


def owner(pid: int | None = None) -> str:
    """Process ``pid`` (default: this one) as ``<hostname>/<pid>/<start>``: the owner label of
    what a run creates in the engine. ``start`` is the process's start time in clock ticks since
    boot (``/proc/<pid>/stat`` field 22, proc(5)), so a later process given the same pid is not
    taken for it; ``0`` where /proc cannot tell."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}/{pid}/{_start_ticks(pid) or 0}"


def owner_gone(label: str) -> bool:
    """True when ``label`` (an :func:`owner` value) names a process of this host that no longer
    runs, or that is another process now; False for another host's, a running one, or a value
    this function cannot read (what it cannot tell is never removed)."""
    host, _, rest = label.partition("/")
    pid, _, start = rest.partition("/")
    if host != socket.gethostname() or not pid.isdigit() or not start.isdigit():
        return False
    now = _start_ticks(int(pid))
    return now is None or (int(start) != 0 and now != int(start))


def running(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (a zombie counts until it is reaped)."""
    return _start_ticks(pid) is not None


def _start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: split after its ")"
    return int(stat.rsplit(")", 1)[1].split()[19])

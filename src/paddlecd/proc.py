"""The one subprocess helper (STYLE.md §11).

It finds the executable up front with a clear error, echoes the command through a callback, checks
the exit status and keeps stderr (or the tail of combined output) for the error message.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from paddlecd.errors import EngineError, PaddlecdError

Echo = Callable[[str], None]


@dataclass(frozen=True)
class Result:
    """A finished command: ``returncode``, captured ``stdout``; ``tail`` is the last output lines."""

    returncode: int
    stdout: str
    tail: str


def which(name: str, *, hint: str | None = None, error: type[PaddlecdError] = EngineError) -> str:
    """Return the absolute path of executable ``name`` or raise ``error`` naming it, with ``hint``."""
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
    error: type[PaddlecdError] = EngineError,
    what: str | None = None,
    tail_lines: int = 30,
) -> Result:
    """Run ``cmd`` and return its :class:`Result`.

    Output (stdout and stderr combined) is streamed line by line to ``on_line`` when given, else
    captured. Secrets must never be in ``cmd`` (it is echoed): pass them by file or environment.

    Args:
        cmd: argv; ``cmd[0]`` is resolved with :func:`which` first.
        env: extra environment merged over ``os.environ``.
        echo: receives ``"$ cmd …"`` before the run.
        on_line: receives each output line (without newline) as it arrives.
        check: raise ``error`` on a non-zero exit.
        what: what the command does, for the error ("building cpu image").

    Raises:
        error: the executable is missing, or it exited non-zero (cause names ``what``/the command,
            the hint carries the last lines of output).
    """
    argv = [which(cmd[0], error=error), *cmd[1:]]
    if echo:
        echo("$ " + " ".join(cmd))
    full_env = {**os.environ, **(env or {})}
    tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
    out: list[str] = []
    proc = subprocess.Popen(
        argv, cwd=cwd, env=full_env, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    if stdin is not None:
        assert proc.stdin is not None
        proc.stdin.write(stdin)
        proc.stdin.close()
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        out.append(line)
        tail.append(line)
        if on_line:
            on_line(line)
    rc = proc.wait()
    result = Result(rc, "\n".join(out), "\n".join(tail))
    if check and rc != 0:
        last = next((ln for ln in reversed(tail) if ln.strip()), "")
        raise error(
            f"{what or cmd[0]} failed (exit {rc}): {last.strip()[:300]}",
            "see the output above" if on_line else "last output:\n" + result.tail,
        )
    return result

"""``invoke`` runs from a fork server: each run is its own process with its own environment, working
folder, standard streams and exit code, as from ``subprocess.run``, without paying for the
third-party imports every time.

A run of the CLI spends most of its CPU importing libraries (docker, boto3, the kubernetes
client, securesystemslib, cryptography, jsonschema, rich, invoke: ~0.6-1 s of the 0.9-1.7 s a
task that stops at its flags takes on this 2-core VM, ``python -X importtime``), and the suite
runs the CLI a few hundred times. One server per test process imports those libraries once and
forks for each run; the child sets the run's environment, folder and streams, then loads
``tasks.py`` and paddlecd afresh (so nothing of paddlecd's module state is shared between runs)
and runs invoke's own entry point, exiting with its code.

What a fork differs in from an exec, and why it does not matter here: the interpreter's start-up
flags and ``PYTHON*`` variables are the server's (tests set none); the libraries above were
imported under the server's environment (none reads the environment at import: they do when a
client or session is made, in the child); the child ends as a forked ``multiprocessing`` worker
does, without the interpreter's module teardown (threads joined, ``atexit`` handlers run, garbage
collected, streams flushed, then ``os._exit``: a teardown touched every page of the server's heap,
copying it). Tests of what a person sees on a terminal, of signals
and of a killed process start a real process (``invoke_on_terminal``, ``subprocess.Popen``).
``SUITE_CLI_EXEC=1`` makes :func:`run` start a real process every time, to compare.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

# Imported once by the server: what every task's path loads, none of paddlecd itself.
PRELOAD = ("invoke", "invoke.main", "yaml", "rich.console", "rich.live", "rich.progress",
           "requests", "urllib3", "docker", "boto3", "botocore.session", "jsonschema",
           "cryptography.hazmat.primitives.asymmetric.ec", "securesystemslib.signer",
           "kubernetes.client", "tenacity", "semver", "filelock")

_SERVER = r"""
import importlib, json, os, sys
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
# Out of the collector's sight: a child's collections (the last ones at its exit among them)
# would otherwise touch every preloaded object and copy each page of the server's heap, ~1 s a
# run (the gc.freeze documentation: before fork, for copy-on-write).
import gc
gc.freeze()
reply = os.fdopen(int(sys.argv[2]), "w", buffering=1)
requests = sys.stdin

def serve():
    for line in requests:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            return job  # the child leaves the loop and runs the job
        reply.write(f"pid {pid}\n")
        _, status = os.waitpid(pid, 0)
        reply.write(f"exit {os.waitstatus_to_exitcode(status)}\n")
    raise SystemExit(0)

job = serve()
requests.close()
reply.close()
os.setsid()  # its own process group: a timeout kills the run and what it started
os.chdir(job["cwd"])
os.environ.clear()
os.environ.update(job["env"])
for fd, path, mode in ((0, os.devnull, os.O_RDONLY), (1, job["stdout"], os.O_WRONLY),
                       (2, job["stderr"], os.O_WRONLY)):
    os.dup2(os.open(path, mode), fd)
sys.stdin = open(0, closefd=False)
sys.stdout = open(1, "w", closefd=False, buffering=1)
sys.stderr = open(2, "w", closefd=False, buffering=1)
sys.argv = job["argv"]
try:
    from invoke.main import program
    program.run()
    code = 0
except SystemExit as e:  # what the interpreter makes of it (Python/pythonrun.c)
    code = e.code
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
except BaseException:
    sys.excepthook(*sys.exc_info())
    code = 1
# The end of an interpreter without its module teardown (which would touch, and so copy, every
# page of the server's heap): threads are waited for, atexit handlers run, streams flushed.
import atexit, gc, threading
for thread in threading.enumerate():
    if thread is not threading.main_thread() and not thread.daemon:
        thread.join()
atexit._run_exitfuncs()
gc.collect()  # what is left in cycles is finalized (an open file flushed) as at exit
sys.stdout.flush()
sys.stderr.flush()
os._exit(code or 0)
"""


class ForkServer:
    """One server process of this test process; :meth:`run` is thread-safe (one run at a time)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None

    def _start(self) -> None:
        read, write = os.pipe()
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER, json.dumps(PRELOAD), str(write)],
            stdin=subprocess.PIPE, text=True, pass_fds=(write,), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env={k: v for k, v in os.environ.items()
                                            if not k.startswith("PADDLECD_")})
        os.close(write)
        self._replies, self._buffer = read, b""

    def run(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
            timeout: float) -> subprocess.CompletedProcess:
        """Run ``argv`` (``argv[0]`` the invoke executable) in a forked child; returns what
        ``subprocess.run(argv, capture_output=True, text=True)`` would.

        Raises:
            subprocess.TimeoutExpired: the run took longer than ``timeout`` seconds (it and its
                process group are killed).
        """
        with self._lock, tempfile.TemporaryDirectory(prefix="cli-run-") as tmp:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            out.touch()
            err.touch()
            job = {"argv": list(argv), "cwd": str(cwd), "env": dict(env), "stdout": str(out),
                   "stderr": str(err)}
            assert self._proc is not None and self._proc.stdin is not None
            self._proc.stdin.write(json.dumps(job) + "\n")
            self._proc.stdin.flush()
            pid = int(self._line(None).split()[1])
            line = self._line(timeout)
            if line is None:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:  # it ended as the timeout came
                    pass
                self._line(None)
                raise subprocess.TimeoutExpired(list(argv), timeout, out.read_text(),
                                                err.read_text())
            return subprocess.CompletedProcess(list(argv), int(line.split()[1]),
                                               out.read_text(), err.read_text())

    def _line(self, timeout: float | None) -> str | None:
        """The server's next reply line, or None when none came within ``timeout`` seconds
        (``None``: wait as long as it takes). Raises RuntimeError if the server is gone."""
        import select
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._replies], [], [], left)[0]:
                return None
            chunk = os.read(self._replies, 4096)
            if not chunk:
                raise RuntimeError("the CLI fork server ended (tests/support/forkserver.py)")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()


    def close(self) -> None:
        """End the server (it exits when its requests end) and wait for it."""
        if self._proc is not None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            self._proc.wait(timeout=30)
            os.close(self._replies)
            self._proc = None


_server = ForkServer()
atexit.register(_server.close)


def run(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
        timeout: float) -> subprocess.CompletedProcess:
    """``argv`` run from this test process's fork server (or, with ``SUITE_CLI_EXEC=1``, as a new
    process): a :class:`subprocess.CompletedProcess` with text stdout and stderr."""
    if os.environ.get("SUITE_CLI_EXEC") == "1":
        return subprocess.run(list(argv), cwd=cwd, env=dict(env), capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return _server.run(argv, cwd=cwd, env=env, timeout=timeout)

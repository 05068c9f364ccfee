"""Running the project's ``invoke`` from the checkout's root, as a user does: each run its own
process (from the fork server of support/forkserver.py, which saves the libraries' imports), with
its own environment, streams and exit code."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from support import forkserver
from support.project import CACHE_SCOPE, ROOT

# The invoke of the interpreter running the tests (the project's .venv under .ci/run).
INVOKE = str(Path(sys.executable).parent / "invoke")


def invoke(*args: str, env: Mapping[str, str] | None = None, timeout: float = 1200,
           **extra: str) -> subprocess.CompletedProcess:
    """Run ``invoke *args`` from the checkout's root; stdout and stderr captured as text.

    Args:
        env: the whole environment of the run; default this process's (``os.environ``).
        timeout: seconds before the run is killed (``subprocess.TimeoutExpired``).
        extra: variables added to ``env``, e.g. ``PADDLECD_STATE_DIR=str(tmp_path)``.
    """
    full = {**(os.environ if env is None else env), **extra}
    return forkserver.run([INVOKE, *args], cwd=ROOT, env=full, timeout=timeout)


def clean_env(*, drop: tuple[str, ...] = ("PADDLECD_", "GITHUB_"), **extra: str) -> dict[str, str]:
    """This process's environment without the variables starting with ``drop`` (so a developer's
    own ``PADDLECD_*`` or a CI runner's ``GITHUB_*`` cannot change what a test sees), plus
    ``extra``. The keep switch passes through: ``PADDLECD_KEEP=1 pytest …`` keeps containers."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(drop) or k in KEEP_ENV}
    return {**kept, **extra}


KEEP_ENV = ("PADDLECD_KEEP", "PADDLECD_RUNTIME_KEEP")


_KEYS: dict[str, str] = {}


def signing_env() -> dict[str, str]:
    """One key pair per test process: verify signs with it, promotion trusts it."""
    if not _KEYS:
        from paddlecd.signing import keys

        private, public = keys.keygen(Path(tempfile.mkdtemp(prefix="paddlecd-keys-")) / "keys")
        _KEYS.update(PADDLECD_VERIFY_SIGNING_KEY=str(private),
                     PADDLECD_RELEASE_TRUSTED_KEYS=str(public))
    return dict(_KEYS)


def cli_env(registry: Any, state: Path, **extra: str) -> dict[str, str]:
    """This process's environment (with what fixtures such as ``registry_env`` and ``s3_env`` set)
    for a user of ``registry`` (a :class:`paddlecd.registry.embedded.RegistryServer`, or
    ``None``): its Docker config, host and CA, with the state folder and lock file under ``state``
    and this process's build cache scope, plus ``extra``."""
    env = {**os.environ, "PADDLECD_STATE_DIR": str(state),
           "PADDLECD_LOCK_FILE": str(state / "lock.yaml"),
           "PADDLECD_BUILD_CACHE_SCOPE": CACHE_SCOPE, **signing_env()}
    if registry is not None:
        env.update(DOCKER_CONFIG=str(registry.docker_config_dir),
                   PADDLECD_REGISTRY_URL=registry.host)
        if registry.ca_file:
            env["PADDLECD_REGISTRY_CA_FILE"] = str(registry.ca_file)
    return {**env, **extra}


def invoke_on_terminal(*args: str, env: Mapping[str, str], columns: int = 100,
                       timeout: float = 1200) -> tuple[int, str, bytes]:
    """Run ``invoke *args`` with stderr on a pseudo-terminal of ``columns`` columns (a person's
    terminal: the live view) and stdout on a pipe (what a script captures); stdin is empty.

    Returns:
        ``(exit code, stdout text, every byte written to the terminal)``.
    """
    import fcntl
    import pty
    import struct
    import termios
    import threading

    main, side = pty.openpty()
    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    full = {k: v for k, v in env.items() if k not in ("CI", "GITHUB_ACTIONS")}
    full.update(TERM="xterm-256color", COLUMNS=str(columns))
    proc = subprocess.Popen([INVOKE, *args], cwd=ROOT, env=full, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=side)
    os.close(side)
    screen = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the last writer closed the terminal
                return
            if not chunk:
                return
            screen.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    finally:
        reader.join(timeout=10)
        os.close(main)
    return proc.returncode, stdout.decode(), bytes(screen)


def rendered(screen: bytes, columns: int = 100, rows: int = 2000) -> list[str]:
    """What a terminal of ``columns`` shows after ``screen`` was written to it (pyte, a VT100
    emulator, as an independent reader of the control codes): its lines, trailing blanks cut.
    ``rows`` is large so that nothing scrolls away."""
    import pyte

    term = pyte.Screen(columns, rows)
    pyte.ByteStream(term).feed(screen)
    lines = [line.rstrip() for line in term.display]
    while lines and not lines[-1]:
        lines.pop()
    return lines

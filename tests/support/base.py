"""The bootstrapped CPU base in the suite: which tests need it, the lock around building it, and
the order tests run in (what needs no services first, what needs the base last).

A fresh machine spends ~3 minutes bootstrapping the CPU Paddle base (debootstrap + Paddle's wheel);
one worker builds it in the background from the start (tests/integration/conftest.py), while both
workers run the unit tier and the integration tests that need only registries and S3 servers. The
tests that use the base come last, longest first, so neither worker idles at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from filelock import FileLock

# Tests that take minutes (seconds on this 2-core VM, from `scripts/test.sh`'s durations table):
# started first among those that need the base, so the other worker is not left waiting at the end.
LONG_FIRST = ("test_readme_demo.py", "test_benchmarks.py", "test_artifacts_check.py",
              "test_podman.py")


def needs_base(item: pytest.Item) -> bool:
    """Whether ``item`` bootstraps the CPU base: through the ``paddle_base`` fixture, or by running
    paddlecd itself (marked ``uses_base``)."""
    return "paddle_base" in getattr(item, "fixturenames", ()) or bool(
        item.get_closest_marker("uses_base"))


def tier(item: pytest.Item) -> tuple[int, int]:
    """The sort key: unit tests, then integration tests without the base, then with it (the
    longest modules of those first); pytest's own order within each."""
    if "/integration/" not in str(item.path):
        return (0, 0)
    if not needs_base(item):
        return (1, 0)
    return (2, 0 if item.path.name in LONG_FIRST else 1)


def lock(tmp_path_factory: pytest.TempPathFactory) -> FileLock:
    """The session's lock around bootstrapping: one debootstrap at a time on this engine (the
    rootfs and the base build are cached by the engine and shared by everything on it). Not
    thread-local: the background build takes it on the main thread and releases it on its own."""
    return FileLock(str(tmp_path_factory.getbasetemp().parent / "paddle-base.lock"),
                    thread_local=False)


# ------------------------------------------------------------ one push of the base per session
# `docker push` of the 1.1 GB base gzips its layers again for every registry (40-60 s each on this
# 2-core VM); a registry-to-registry copy moves the compressed blobs as they are (2 s, skopeo).
# So the session pushes the base once, with paddlecd's own bootstrap, into a seed registry the
# xdist controller starts (pytest_configure, below); every other registry that needs the base
# (each worker's, the demo's, the benchmark's) gets a copy of it. Name without our prefix: a
# PADDLECD_* variable would be reported by every CLI run as "not a setting".
SEED_ENV = "SUITE_BASE_SEED"
_SEED = pytest.StashKey[object]()


def pytest_configure(config: pytest.Config) -> None:
    """In the controller (or a run without xdist), start the seed registry when integration tests
    may run; workers inherit its address in :data:`SEED_ENV`."""
    if hasattr(config, "workerinput") or "not integration" in (config.getoption("markexpr") or ""):
        return
    import tempfile

    from paddlecd.registry.embedded import RegistryServer, free_port

    root = Path(tempfile.mkdtemp(prefix="paddlecd-base-seed-"))
    server = RegistryServer(root, port=free_port()).start()
    config.stash[_SEED] = (server, root)
    os.environ[SEED_ENV] = server.host
    _reap_with_session(os.getpid(), server.process.pid, root)


# A session killed by `timeout`, Ctrl-C twice or kill -9 never reaches pytest_unconfigure, and the
# seed registry (its own process group) ran on (five found after one afternoon's partial runs).
# A watcher outside the session stops it and removes its storage when the session's pid is gone.
_WATCHER = """
import os, shutil, signal, sys, time
if os.fork():
    os._exit(0)  # the session waits for this parent only; the watcher runs on, detached
session, registry, root = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
while os.path.exists(f"/proc/{session}") and os.path.exists(f"/proc/{registry}"):
    time.sleep(2)
if os.path.exists(f"/proc/{registry}"):
    os.killpg(registry, signal.SIGKILL)
    shutil.rmtree(root, ignore_errors=True)
"""


def _reap_with_session(session_pid: int, registry_pid: int, root: Path) -> None:
    """Start the watcher of :data:`_WATCHER`: when ``session_pid`` is gone it kills the process
    group of ``registry_pid`` and removes ``root``; it exits with the registry."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", _WATCHER, str(session_pid), str(registry_pid),
                    str(root)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, start_new_session=True, check=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the seed registry and remove its storage (the engine keeps the base's layers)."""
    started = config.stash.get(_SEED, None)
    if started is not None:
        server, root = started
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
        os.environ.pop(SEED_ENV, None)


def seed_host(state: Path) -> str | None:
    """The seed registry's ``host:port`` holding the CPU base, pushed there by paddlecd's bootstrap
    on the session's first call (hold :func:`lock`); None when no seed registry runs."""
    seed = os.environ.get(SEED_ENV)
    if seed:
        from paddlecd.image import bootstrap

        from support.project import project_settings

        bootstrap.bootstrap(project_settings(state, **{"registry.url": seed}), "cpu")
    return seed


def copy_to(host: str, state: Path, *, docker_config: Path | None = None) -> bool:
    """Give registry ``host`` the CPU base from the session's seed registry, as a copy of its
    compressed blobs (``skopeo copy``), then pull it there (the engine knows its digest in
    ``host``; every layer is present: nothing is downloaded) and push it back (every layer
    "already exists": nothing is uploaded). The pull alone does not tell the engine that the
    layers' blobs are in ``host`` (it records that for layers it downloads or pushes); without
    that, the first push of an image built on the base to ``host`` gzips and uploads the 1.1 GB
    base layer again (measured: 1 min 57 s, against 0.7 s after the no-op push, which lets the
    engine mount the blobs from the base's repository). The first call of a session pushes the
    base into the seed with paddlecd's bootstrap, as a user's first run does.

    Call it holding :func:`lock`. ``state`` is a scratch state folder; ``docker_config`` a folder
    with the ``config.json`` holding ``host``'s credentials. Returns False when no seed registry
    runs (the caller then bootstraps into ``host`` itself).
    """
    seed = seed_host(state)
    if not seed:
        return False
    from paddlecd import engine
    from paddlecd.image import variants

    from support.project import project_settings

    source = variants.get(project_settings(state, **{"registry.url": seed}), "cpu").base
    target = host + source[len(seed):]
    auth = ["--dest-authfile", str(docker_config / "config.json")] if docker_config else []
    subprocess.run(["skopeo", "copy", "--quiet", "--src-tls-verify=false",
                    "--dest-tls-verify=false", *auth, f"docker://{source}", f"docker://{target}"],
                   check=True, capture_output=True, timeout=300)
    env = {**os.environ, **({"DOCKER_CONFIG": str(docker_config)} if docker_config else {})}
    for verb in ("pull", "push"):  # the push: no upload, but the engine learns the blobs
        subprocess.run(["docker", verb, "-q", target], check=True, capture_output=True, env=env,
                       timeout=300)
    engine.remove_image(source)  # the seed's tag only; the image stays under ``target``
    return True

"""Fixtures that start real services: a distribution registry with htpasswd auth over TLS with a
self-signed CA, and (in their own modules) S3. The Docker engine must already run (.ci/run starts
it).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from paddlecd import engine
from paddlecd.errors import StorageError
from paddlecd.registry.embedded import RegistryServer, free_port

from support import base, engine_cleanup, project_settings, rgw

USER, PASSWORD = "ci", "s3cret-Pa55"


@pytest.fixture(scope="session")
def docker_engine():
    """The real engine; fails (not skips) when it is not running: CI must start it."""
    return engine.client()


@pytest.fixture(scope="session")
def registry(tmp_path_factory, docker_engine):
    """A real CNCF distribution registry on 127.0.0.1 with htpasswd auth and TLS (self-signed CA).

    The engine trusts the CA via /etc/docker/certs.d; credentials are in a Docker config.json whose
    folder is ``registry.docker_config_dir`` (use it as DOCKER_CONFIG). At the end of the session
    every local image named ``<registry.host>/…`` (built, pulled or tagged by this session's
    tests) is removed, unless PADDLECD_KEEP=1 (support/engine_cleanup.py).
    """
    root = tmp_path_factory.mktemp("registry")
    server = RegistryServer(root, port=free_port(), users={USER: PASSWORD}, tls=True).start()
    server.trust_in_engine()
    server.docker_config_dir = server.docker_config(root / "docker-config", USER, PASSWORD)
    yield server
    server.stop()
    if not engine_cleanup.keep_requested():
        engine_cleanup.remove_images_of(server.host)


@pytest.fixture(autouse=True)
def engine_leftovers(request):
    """After each test that used the ``registry`` fixture: remove the containers of that registry's
    images the test left behind (and paddlecd's networks they were on), unless PADDLECD_KEEP=1.
    Images are shared by the session's tests; ``registry`` removes them at the end."""
    server = request.getfixturevalue("registry") if "registry" in request.fixturenames else None
    yield
    if server is not None and not engine_cleanup.keep_requested():
        engine_cleanup.remove_containers_of(server.host)


@pytest.fixture
def registry_env(registry, monkeypatch):
    """Environment pointing paddlecd at ``registry``: DOCKER_CONFIG and PADDLECD_REGISTRY_* set."""
    monkeypatch.setenv("DOCKER_CONFIG", str(registry.docker_config_dir))
    monkeypatch.setenv("PADDLECD_REGISTRY_URL", registry.host)
    monkeypatch.setenv("PADDLECD_REGISTRY_CA_FILE", str(registry.ca_file))
    return registry


def pytest_collection_modifyitems(items):
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


# ------------------------------------------------------------ the bootstrapped base, shared
def pytest_collection_finish(session: pytest.Session) -> None:
    """On one worker, start bootstrapping the base in the background while the first tests run.

    Debootstrap and the Paddle wheel take ~3 minutes on a fresh machine, the push into the
    session's seed registry ~1 more; tests that need the base run last (tests/conftest.py), and by
    then the seed registry has it, so each worker's ``paddle_base`` only copies it. The thread
    holds :func:`support.base.lock` until it is done; if it fails, ``paddle_base`` builds again
    and reports the error itself."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    if worker != "gw0" or not any(base.needs_base(i) for i in session.items):
        return
    factory = session.config._tmp_path_factory  # what the tmp_path_factory fixture returns
    lock = base.lock(factory)
    lock.acquire()
    state = factory.mktemp("base-prefetch")

    def build() -> None:
        from paddlecd.image import bootstrap

        try:
            # paddlecd's bootstrap into the seed registry: the push (a gzip of 1.1 GB, the
            # costliest step after debootstrap) runs beside the tests that need no base, not
            # in the first one that does. Without a seed, a host name nothing resolves: the tag
            # stays local and is never pushed.
            if not base.seed_host(state):
                bootstrap.build_base(project_settings(state, **{"registry.url": PREFETCH_HOST}),
                                     "cpu")
        except Exception:  # noqa: BLE001 — paddle_base runs the same steps and fails by name
            pass
        finally:
            lock.release()

    session.config.stash[_PREFETCH] = threading.Thread(target=build, name="base-prefetch",
                                                       daemon=True)
    session.config.stash[_PREFETCH].start()


PREFETCH_HOST = "base-prefetch.paddlecd.invalid"
_PREFETCH = pytest.StashKey[threading.Thread]()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Untag the background build's base (the engine's build cache keeps its layers)."""
    thread = session.config.stash.get(_PREFETCH, None)
    if thread is not None and not thread.is_alive() and not engine_cleanup.keep_requested():
        engine_cleanup.remove_images_of(PREFETCH_HOST)


# ------------------------------------------------------------ artifacts (object storage), issue 4
_JIT_SAVE = """
import sys, paddle
from paddle.static import InputSpec
for dest, out_features, seed in zip(*[iter(sys.argv[1:])] * 3):
    paddle.seed(int(seed))
    with paddle.utils.unique_name.guard():  # names as in a process of its own (linear_0.w_0)
        paddle.jit.save(paddle.nn.Linear(4, int(out_features)), dest + "/inference",
                        input_spec=[InputSpec([None, 4], "float32")])
"""


def jit_save(*exports: tuple[Path, int, int]) -> None:
    """Real ``paddle.jit.save`` exports of ``paddle.nn.Linear(4, out_features)`` (InputSpec [None,
    4]), one per ``(dest, out_features, seed)``, written by Paddle on the host CPU in one
    subprocess (one paddle import, ~2.5 s of CPU; and Paddle stays out of this process).
    Parameters take 20 * out_features bytes (float32 weight [4, N] + bias [N])."""
    import subprocess
    import sys

    for dest, _, _ in exports:
        dest.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-c", _JIT_SAVE, *(str(x) for e in exports for x in e)],
                   check=True, capture_output=True)


@pytest.fixture(scope="session")
def jit_exports(tmp_path_factory):
    """Three real exports: ``tiny`` (Linear(4, 2)), ``tiny2`` (same shape, other weights) and
    ``big`` (Linear(4, 786432): ~15.7 MB of parameters, above a 5 MiB multipart threshold).
    Made once for the session's workers (support/shared.py): tests only read them (uploads; no
    ``artifacts.check``, which writes its record beside the model)."""
    from support.shared import once

    def make(root: Path) -> None:
        jit_save((root / "tiny", 2, 0), (root / "tiny2", 2, 1), (root / "big", 786432, 0))

    root = once(tmp_path_factory, "jit-exports", make)
    return {name: root / name for name in ("tiny", "tiny2", "big")}


@pytest.fixture(scope="session")
def moto_server():
    """moto's S3 server over real HTTP on 127.0.0.1 (ThreadedMotoServer, one per xdist worker).
    ``moto_server.endpoint`` is its URL; ``moto_server.requests`` records every request line it
    served (from werkzeug's access log) so tests count PutObject/UploadPart calls server-side."""
    import logging
    import re

    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.requests = []

    class _Log(logging.Handler):
        def emit(self, record):  # werkzeug colours 4xx/5xx lines: strip the ANSI codes
            server.requests.append(re.sub(r"\x1b\[[0-9;]*m", "", record.getMessage()))

    logging.getLogger("werkzeug").addHandler(_Log(logging.INFO))
    logging.getLogger("werkzeug").setLevel(logging.INFO)
    server.start()
    host, port = server.get_host_and_port()
    server.endpoint = f"http://{host}:{port}"
    server.kind, server.key, server.secret, server.ca_file = "moto", "testing", "testing", None
    yield server
    server.stop()


@pytest.fixture(scope="session")
def rgw_server(tmp_path_factory):
    """A real Ceph RADOS Gateway (mon + memstore OSD + radosgw on 127.0.0.1, ~2-3 s to start), one
    per xdist worker: its own temp dir, ports and fsid, so the workers share nothing
    (support/rgw.py). ``endpoint`` is HTTP, ``https_endpoint`` HTTPS with ``ca_file``; ``key`` and
    ``secret`` are its user's; ``requests`` are its access-log lines. Fails (not skips) when Ceph
    is not installed: CI installs it (scripts/stack.sh engine)."""
    for attempt in (1, 2):  # a port taken between free_port() and the daemon's bind: new ports
        server = rgw.RgwServer(tmp_path_factory.mktemp("rgw"))
        try:
            server.start()
            break
        except StorageError:
            server.stop()
            if attempt == 2:
                raise
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3_server(rgw_server):
    """The S3 server of tests that do not choose one: Ceph RGW. A module that runs against moto as
    well overrides this fixture with a parametrised one (test_artifacts_storage_s3.py)."""
    return rgw_server


@pytest.fixture
def s3_env(s3_server, monkeypatch, tmp_path):
    """Environment pointing paddlecd (and subprocesses) at ``s3_server`` (HTTP), its
    credentials."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": s3_server.key,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "aws-credentials"),
        "PADDLECD_STORAGE_ENDPOINT_URL": s3_server.endpoint,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    return s3_server


# ------------------------------------------------------------ main job (build, push, verify), issue
# 2
@pytest.fixture(scope="session")
def main_state(tmp_path_factory):
    """The state folder shared by the main-job session fixtures of this worker."""
    return tmp_path_factory.mktemp("main-state")


@pytest.fixture(scope="session")
def paddle_base(registry, main_state, tmp_path_factory):
    """The CPU Paddle base, bootstrapped for real (debootstrap + PyPI paddlepaddle), in
    ``registry`` and locked in ``main_state/lock.local.yaml`` (a bootstrapped, per-machine pin). The
    local build is shared by xdist workers (file lock; the engine caches the rootfs and layers).
    paddlecd's bootstrap pushes it once a session, into the seed registry, and each worker's
    registry gets a copy of its blobs (support/base.py: a second ``docker push`` would gzip 1.1 GB
    again); bootstrap then finds it in the registry, as on a user's second run."""
    from paddlecd.image import bootstrap, lock

    settings = project_settings(main_state, registry=registry)
    with pytest.MonkeyPatch.context() as mp, base.lock(tmp_path_factory):
        mp.setenv("DOCKER_CONFIG", str(registry.docker_config_dir))
        base.copy_to(registry.host, tmp_path_factory.mktemp("seed-state"),
                     docker_config=registry.docker_config_dir)
        bootstrap.bootstrap(settings, "cpu")
        entries = lock.lock(settings, ["cpu"])
    return entries["cpu"]


@pytest.fixture(scope="session")
def paddle_image(registry, main_state, paddle_base):
    """A locally available Paddle CPU image built from the ``cpu`` variant (default user ``paddle``,
    uid 1000); returns its tag ``<registry>/paddlecd/paddle:cpu-<gitsha>``."""
    from paddlecd.image import build as builder

    settings = project_settings(main_state, registry=registry)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DOCKER_CONFIG", str(registry.docker_config_dir))
        return builder.build(settings, "cpu").tag


# ------------------------------------------------------------ podman's API service, issue 22
@pytest.fixture(scope="session")
def podman_service(tmp_path_factory):
    """podman's Docker-compatible API service (``podman system service``) with its config, image
    store and state under a temp folder of this worker (support/podman.py); ``host`` is its
    ``DOCKER_HOST``. Fails (not skips) when podman is missing: CI installs it (scripts/stack.sh
    engine). Its tests share one worker (``xdist_group("podman")``)."""
    from support import podman

    service = podman.PodmanService(tmp_path_factory.mktemp("podman")).start()
    yield service
    service.stop()

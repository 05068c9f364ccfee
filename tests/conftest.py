"""Shared test configuration.

Unit tests (tests/unit) need no services. Integration tests (tests/integration) talk to the real
Docker engine, a real distribution registry and a real S3 server; .ci/run and scripts/stack.sh start
the engine, the fixtures start registries and S3 servers themselves. Shared helpers live in
tests/support (``from support import ROOT, invoke``). The session fails when a test wrote into the
checkout (support/guard.py). Tests run unit tier first, the ones that need the bootstrapped base
last (support/base.py).
"""

import signal
from pathlib import Path

import pytest

from paddlecd import config

from support import ROOT, base, project_settings
from support.base import pytest_configure, pytest_unconfigure  # noqa: F401 (hooks: seed registry)
from support.guard import pytest_sessionfinish, pytest_sessionstart  # noqa: F401 (hooks)

# A suite started in the background of a shell without job control (`(scripts/test.sh &)`, a CI
# step's `cmd &`) inherits SIGINT ignored, and every process it starts keeps it ignored across
# exec: the Ctrl-C tests' `invoke` then never saw their SIGINT and timed out (3 tests, in two
# runs started that way; the same runs in the foreground passed). Each test process handles
# SIGINT as Python does by default, so what it starts gets SIGINT's default again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(trylast=True)  # after tests/integration's hook has marked its tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=base.tier)  # stable: pytest's order within each tier (support/base.py)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadgroup`` in the collection's (tiered) order, not largest group first
    (support/schedule.py)."""
    if config.getoption("dist") == "loadgroup":
        from support.schedule import CollectionOrder

        return CollectionOrder(config, log)
    return None


@pytest.fixture
def project_root() -> Path:
    """The checkout's root (holds images/, smoke/, pipelines/)."""
    return ROOT


@pytest.fixture
def settings(tmp_path) -> config.Settings:
    """Settings for the real project files with the state in ``tmp_path/state`` and the lock file
    ``tmp_path/lock.yaml``; the environment is not read."""
    return project_settings(tmp_path / "state", lock_file=tmp_path / "lock.yaml")

"""The bootstrapped CPU base in the suite: which tests need it, the lock around building it, and
the order tests run in (what needs no services first, what needs the base last).

A fresh machine spends ~3 minutes bootstrapping the CPU Paddle base (debootstrap + Paddle's wheel);
one worker builds it in the background from the start (tests/integration/conftest.py), while both
workers run the unit tier and the integration tests that need only registries and S3 servers. The
tests that use the base come last, longest first, so neither worker idles at the end.
"""

from __future__ import annotations

import pytest
from filelock import FileLock

# Tests that take minutes (seconds on this 2-core VM, from `scripts/test.sh`'s durations table):
# started first among those that need the base, so the other worker is not left waiting at the end.
LONG_FIRST = ("test_readme_demo.py", "test_benchmarks.py", "test_artifacts_check.py")


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

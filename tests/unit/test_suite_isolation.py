"""The suite's own rules (STYLE.md §21): no test writes into the checkout, servers listen on ports
nobody else picked, and a worker's builds keep their cache records to themselves. Two xdist
workers share one engine and one file system; each rule here failed CI once when broken."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap

import pytest

from support import ROOT, sources

SERVERS = {"RegistryServer", "ThreadedMotoServer"}


def _pytest(folder, basetemp, *args: str) -> subprocess.CompletedProcess:
    """Run pytest on ``folder`` with its temporary folders under ``basetemp``: without its own
    ``--basetemp`` the inner session numbers one in the shared ``/tmp/pytest-of-<user>`` and, at
    exit, deletes the outer sessions' old ones there (GiBs of exports and build contexts), which
    outlasted the timeout in CI once."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)  # the outer session's plugins are not on this one's path
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "support.guard", "-p", "no:cacheprovider",
         "-p", "no:randomly", "--rootdir", str(folder), "--basetemp", str(basetemp),
         *args, str(folder)],
        cwd=folder, env=env, capture_output=True, text=True, timeout=120,
    )


@pytest.mark.parametrize("workers", [[], ["-n", "1"]])
def test_the_guard_fails_a_session_that_wrote_into_its_checkout(tmp_path, workers):
    """Run by the controller (with or without xdist workers), it names what a test added."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "test_leak.py").write_text(textwrap.dedent("""
        from pathlib import Path
        def test_writes_next_to_itself():
            (Path(__file__).parent / "leak.txt").write_text("x")
        def test_writes_under_tmp_path(tmp_path):
            (tmp_path / "fine.txt").write_text("x")
    """))
    run = _pytest(checkout, tmp_path / "basetemp", *workers)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "2 passed" in run.stdout and "the tests wrote into" in run.stdout
    assert "  added leak.txt" in run.stdout and "fine.txt" not in run.stdout


def test_servers_in_tests_and_benchmarks_listen_on_a_free_port():
    """A literal port is shared by both workers (and a developer's own stack): the second server
    fails to start, or a test talks to the other worker's."""
    offenders = []
    for path in [*(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]:
        for node in ast.walk(sources.tree(path)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in SERVERS:
                port = next((k.value for k in node.keywords if k.arg == "port"), None)
                named = isinstance(port, ast.Call) and getattr(port.func, "id", "") == "free_port"
                if not named:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_each_test_process_builds_in_a_cache_scope_of_its_own():
    """The scope carries the worker id and a suffix unique to the run, in both ways tests make
    settings (in-process and for an `invoke` subprocess)."""
    probe = ("from support import cli, project; s = project.project_settings(project.ROOT / 'x');"
             "print(s.build.cache_scope, cli.cli_env(None, project.ROOT / 'x')"
             "['PADDLECD_BUILD_CACHE_SCOPE'])")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests"), "PYTEST_XDIST_WORKER": "gw7"}
    runs = [subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                           check=True).stdout.split() for _ in range(2)]
    assert all(a == b and a.startswith("test-gw7-") for a, b in runs)
    assert runs[0] != runs[1]


class _Node:
    """A stand-in for xdist's WorkerController: records the test indexes it is sent."""

    def __init__(self, name: str):
        self.name, self.sent, self.shutting_down = name, [], False
        self.gateway = type("Gateway", (), {"id": name})()

    def send_runtest_some(self, indexes):
        self.sent += indexes

    def shutdown(self):
        pass


def test_work_units_go_out_in_collection_order_with_groups_kept_whole():
    """xdist's loadgroup alone hands out the largest group first (a group of 3 before the unit
    tier: the podman tier waited at second 0 for the base); CollectionOrder keeps the collection's
    tiered order and still sends a group's tests together to one worker."""
    from xdist.scheduler import LoadGroupScheduling

    from support.schedule import CollectionOrder

    collection = ["tests/unit/test_a.py::test_1", "tests/unit/test_a.py::test_2",
                  "tests/integration/test_x.py::test_1",
                  *(f"tests/integration/test_podman.py::test_{i}@podman" for i in range(3))]
    config = pytest.Config.fromdictargs({"tx": ["popen", "popen"], "dist": "loadgroup"}, [])

    def first_sent(scheduler_class):
        scheduler = scheduler_class(config)
        nodes = [_Node("gw0"), _Node("gw1")]
        for node in nodes:
            scheduler.add_node(node)
        for node in nodes:
            scheduler.add_node_collection(node, collection)
        scheduler.schedule()
        return [[collection[i] for i in node.sent] for node in nodes]

    assert first_sent(LoadGroupScheduling)[0] == collection[3:]  # the reason it exists
    # two units each to start: one test, one test, then the next test and the whole group
    assert first_sent(CollectionOrder) == [[collection[0], collection[2]],
                                           [collection[1], *collection[3:]]]


def test_a_killed_session_takes_its_seed_registry_with_it(tmp_path):
    """A session killed with kill -9 never reaches pytest_unconfigure; the seed registry of
    support/base.py (its own process group) ran on after each. The watcher stops it and removes
    its storage. Stand-ins: ``sleep`` for the session and for the registry."""
    import time

    from support.base import _reap_with_session

    session = subprocess.Popen(["sleep", "60"])
    registry = subprocess.Popen(["sleep", "60"], start_new_session=True)
    root = tmp_path / "seed"
    root.mkdir()
    try:
        _reap_with_session(session.pid, registry.pid, root)
        time.sleep(3)
        assert registry.poll() is None and root.exists()  # the session lives: left alone
        session.kill()
        session.wait()
        registry.wait(timeout=15)
        assert registry.returncode == -9
        deadline = time.monotonic() + 5
        while root.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not root.exists()
    finally:
        session.kill()
        registry.kill()

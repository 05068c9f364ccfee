"""A pytest plugin that fails the session when a test wrote into the checkout (STYLE.md §21).

The controller (not each xdist worker) records every file under the root folder before the first
test and compares after the last: a file added, removed or rewritten turns a green session red and
is named. Tests write under their own ``tmp_path``; a state folder (``.paddlecd``) is part of the
checkout for this purpose. Left out: what the tooling itself keeps there (git, the venv, bytecode,
caches, the egg-info of an editable install) and :data:`IGNORED_PATHS`. Permissions cannot do
this check: CI runs as root.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

IGNORED_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis"}
# The data of the embedded registry a developer's `scripts/stack.sh up` left running on :5000: the
# demo test pushes to whatever answers there, as README command 1 does, and that server writes here.
IGNORED_PATHS = (".paddlecd/registry",)


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """``{relative path: (size in bytes, mtime in ns)}`` of every file under ``root``, symlinks as
    themselves, skipping :data:`IGNORED_DIRS` and ``*.egg-info`` folders."""
    out: dict[str, tuple[int, int]] = {}
    skip = {root / p for p in IGNORED_PATHS}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in IGNORED_DIRS and not d.endswith(".egg-info")
                   and Path(folder, d) not in skip]
        for name in names:
            path = Path(folder, name)
            st = path.lstat()
            out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """One line per difference: ``added X``, ``removed X`` or ``rewrote X``, sorted by path."""
    lines = [f"added {p}" for p in after.keys() - before.keys()]
    lines += [f"removed {p}" for p in before.keys() - after.keys()]
    lines += [f"rewrote {p}" for p in before.keys() & after.keys() if before[p] != after[p]]
    return sorted(lines, key=lambda line: line.split(" ", 1)[1])


def _controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")  # xdist gives each worker its ``workerinput``


_BEFORE = pytest.StashKey[dict]()


def pytest_sessionstart(session: pytest.Session) -> None:
    if _controller(session.config):
        session.config.stash[_BEFORE] = snapshot(session.config.rootpath)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if not _controller(config) or _BEFORE not in config.stash:
        return
    found = changes(config.stash[_BEFORE], snapshot(config.rootpath))
    if not found:
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    write = reporter.write_line if reporter else print
    write(f"FAILED checkout guard: the tests wrote into {config.rootpath} "
          f"({len(found)} change{'s' * (len(found) != 1)}); write under tmp_path instead:")
    for line in found[:20]:
        write(f"  {line}")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED

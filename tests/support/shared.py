"""Files made once per test session and read by all its xdist workers (exports Paddle writes on
the host: each costs a paddle import, ~2.5 s of CPU).

Only for what tests never change: a test that writes into such a folder (``artifacts.check``
writes its record beside the model) would race the other worker's tests.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def session_folder(factory: pytest.TempPathFactory) -> Path:
    """The folder of this session shared by its workers: the parent of the workers' base temp
    folders under xdist (``pytest-N/``), the base temp folder itself without xdist."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """``session_folder()/name``, filled by ``make(folder)`` the first time any worker asks (the
    others wait on a file lock); a ``make`` that failed or was killed is started again."""
    folder = session_folder(factory) / name
    done = folder.with_name(f"{name}.done")
    with FileLock(str(folder.with_name(f"{name}.lock"))):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            make(folder)
            done.touch()
    return folder

"""Fixtures for the in-image smoke suite (paddle + pytest + stdlib only)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Expect  # noqa: E402


@pytest.fixture(scope="session")
def expect() -> Expect:
    """The expectations passed in by ``invoke verify`` (SMOKE_* variables)."""
    e = Expect.from_env()
    e.out.mkdir(parents=True, exist_ok=True)
    return e


@pytest.fixture
def metric(record_property):
    """``metric(name, value)`` records a JSON-encoded JUnit property, collected into evidence."""

    def record(name: str, value) -> None:
        record_property(name, json.dumps(value))

    return record

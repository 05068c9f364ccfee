"""Shared test configuration.

Unit tests (tests/unit) need no services. Integration tests (tests/integration) talk to the real
Docker engine, a real distribution registry and a real S3 server; .ci/run and scripts/stack.sh start
the engine, the fixtures start registries and S3 servers themselves.
"""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def project_root() -> Path:
    """The checkout's root (holds images/, smoke/, pipelines/)."""
    return ROOT

"""The checkout under test and settings for its real project files (images/, smoke/, pipelines/)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from paddlecd import config

ROOT = Path(__file__).resolve().parents[2]
# This test process's name for what it puts on shared resources (the Docker engine, ports, files):
# the xdist worker id and a suffix unique to the run (STYLE.md §21).
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
UNIQUE = f"{WORKER}-{uuid.uuid4().hex[:8]}"
# The BuildKit cache scope of this process's builds (settings build.cache_scope): a test that
# asserts a re-run is cached sees only layers its own worker built, never those of the other
# worker or of a benchmark's --no-cache builds of the same Dockerfile.
CACHE_SCOPE = f"test-{UNIQUE}"


def project_settings(state: Path, *, registry: Any = None, lock_file: Path | None = None,
                     **flags: Any) -> config.Settings:
    """Settings for the real project files, with the state folder ``state`` and the lock file
    ``lock_file`` (default ``state/lock.yaml``) so a test never touches the checkout's .paddlecd or
    lock, and this process's :data:`CACHE_SCOPE`. ``registry`` is a
    :class:`paddlecd.registry.embedded.RegistryServer` to point at (host and CA);
    ``flags`` are dotted keys as for :func:`paddlecd.config.load`. The environment is not read."""
    base: dict[str, Any] = {"state_dir": str(state),
                            "lock_file": str(lock_file or state / "lock.yaml"),
                            "build.cache_scope": CACHE_SCOPE}
    if registry is not None:
        base["registry.url"] = registry.host
        if registry.ca_file:
            base["registry.ca_file"] = str(registry.ca_file)
    return config.load({**base, **flags}, root=ROOT, environ={})

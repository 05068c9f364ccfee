"""The checkout under test and settings for its real project files (images/, smoke/, pipelines/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from paddlecd import config

ROOT = Path(__file__).resolve().parents[2]


def project_settings(state: Path, *, registry: Any = None, lock_file: Path | None = None,
                     **flags: Any) -> config.Settings:
    """Settings for the real project files, with the state folder ``state`` and the lock file
    ``lock_file`` (default ``state/lock.yaml``) so a test never touches the checkout's .paddlecd or
    lock. ``registry`` is a :class:`paddlecd.localstack.RegistryServer` to point at (host and CA);
    ``flags`` are dotted keys as for :func:`paddlecd.config.load`. The environment is not read."""
    base: dict[str, Any] = {"state_dir": str(state),
                            "lock_file": str(lock_file or state / "lock.yaml")}
    if registry is not None:
        base["registry.url"] = registry.host
        if registry.ca_file:
            base["registry.ca_file"] = str(registry.ca_file)
    return config.load({**base, **flags}, root=ROOT, environ={})

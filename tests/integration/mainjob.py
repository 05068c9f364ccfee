"""Helpers for the main-job integration tests: settings and CLI environment against a test registry."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_KEYS: dict[str, str] = {}


def signing_env() -> dict[str, str]:
    """One key pair per test process (issue 10): verify signs with it, promotion trusts it."""
    if not _KEYS:
        from paddlecd.verify import keys

        private, public = keys.keygen(Path(tempfile.mkdtemp(prefix="paddlecd-keys-")) / "keys")
        _KEYS.update(PADDLECD_VERIFY_SIGNING_KEY=str(private),
                     PADDLECD_RELEASE_TRUSTED_KEYS=str(public))
    return dict(_KEYS)


def project_settings(registry_server, state: Path, **extra):
    """Settings for the real project files (images/, smoke/) against ``registry_server``, with the state
    folder and lock file under ``state`` so tests never touch the checkout's .paddlecd or lock."""
    from paddlecd import config

    flags = {"registry.url": registry_server.host, "state_dir": str(state), "lock_file": str(state / "lock.yaml")}
    if registry_server.ca_file:
        flags["registry.ca_file"] = str(registry_server.ca_file)
    return config.load({**flags, **extra}, root=ROOT, environ={})


def cli_env(registry_server, state: Path, **extra: str) -> dict[str, str]:
    """Environment for running `invoke` as a user would, against ``registry_server``."""
    env = {**os.environ, "DOCKER_CONFIG": str(registry_server.docker_config_dir),
           "PADDLECD_REGISTRY_URL": registry_server.host, "PADDLECD_STATE_DIR": str(state),
           "PADDLECD_LOCK_FILE": str(state / "lock.yaml"), **signing_env(), **extra}
    if registry_server.ca_file:
        env["PADDLECD_REGISTRY_CA_FILE"] = str(registry_server.ca_file)
    return env


def invoke(*args: str, env: dict[str, str], timeout: int = 1200) -> subprocess.CompletedProcess:
    """Run the project's `invoke` from the repo root as a user would; output captured as text."""
    return subprocess.run([str(ROOT / ".venv/bin/invoke"), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)

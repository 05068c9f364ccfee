"""Fixtures that start real services: a distribution registry with htpasswd auth over TLS with a
self-signed CA, and (in their own modules) S3. The Docker engine must already run (.ci/run starts it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from paddlecd import engine
from paddlecd.localstack import RegistryServer, free_port

USER, PASSWORD = "ci", "s3cret-Pa55"


@pytest.fixture(scope="session")
def docker_engine():
    """The real engine; fails (not skips) when it is not running: CI must start it."""
    return engine.client()


@pytest.fixture(scope="session")
def registry(tmp_path_factory, docker_engine):
    """A real CNCF distribution registry on 127.0.0.1 with htpasswd auth and TLS (self-signed CA).

    The engine trusts the CA via /etc/docker/certs.d; credentials are in a Docker config.json whose
    folder is ``registry.docker_config_dir`` (use it as DOCKER_CONFIG).
    """
    root = tmp_path_factory.mktemp("registry")
    server = RegistryServer(root, port=free_port(), users={USER: PASSWORD}, tls=True).start()
    server.trust_in_engine()
    server.docker_config_dir = server.docker_config(root / "docker-config", USER, PASSWORD)
    yield server
    server.stop()


@pytest.fixture
def registry_env(registry, monkeypatch):
    """Environment pointing paddlecd at ``registry``: DOCKER_CONFIG and PADDLECD_REGISTRY_* set."""
    monkeypatch.setenv("DOCKER_CONFIG", str(registry.docker_config_dir))
    monkeypatch.setenv("PADDLECD_REGISTRY_URL", registry.host)
    monkeypatch.setenv("PADDLECD_REGISTRY_CA_FILE", str(registry.ca_file))
    return registry


def pytest_collection_modifyitems(items):
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)

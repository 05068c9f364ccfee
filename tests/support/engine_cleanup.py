"""Removing what integration tests leave in the shared Docker engine.

What a test made is recognised by the test registry it used: every image a test builds, pulls or
tags for a test registry is named ``<host:port>/…`` with that registry's own random port, and the
containers that run such an image carry the name in ``Config.Image``. Another session (another
xdist worker, another checkout on the same engine) has another port, so nothing of theirs
matches. Only references are removed: an image that also carries a name of someone else stays, and
the build cache (and the ``paddlecd-rootfs`` bootstrap image) is kept so the next run stays quick.
``PADDLECD_KEEP=1`` (``runtime.keep``) keeps everything for debugging.
"""

from __future__ import annotations

import contextlib
import os

import docker.errors

from paddlecd import config, engine

from support.cli import KEEP_ENV
from support.project import ROOT


def keep_requested() -> bool:
    """``runtime.keep`` from the environment (``PADDLECD_KEEP`` / ``PADDLECD_RUNTIME_KEEP``)."""
    environ = {k: v for k, v in os.environ.items() if k in KEEP_ENV}
    return config.load(root=ROOT, environ=environ).runtime.keep


def containers_of(host: str) -> list:
    """Containers (running or not) whose image was given as ``host/…``."""
    found = engine.client().containers.list(all=True, ignore_removed=True)
    return [c for c in found
            if str(c.attrs.get("Config", {}).get("Image", "")).startswith(f"{host}/")]


def references_of(host: str) -> list[str]:
    """Local image references (tags and ``repo@digest`` names) under ``host/``."""
    refs: list[str] = []
    # The engine's one-call listing (GET /images/json): docker-py's images.list() inspects each
    # image after listing, and an image another xdist worker removed in between raised
    # ImageNotFound in a fixture's teardown (seen in CI).
    for image in engine.client().api.images():
        names = (*(image.get("RepoTags") or ()), *(image.get("RepoDigests") or ()))
        refs += [r for r in names if r.startswith(f"{host}/")]
    return refs


def remove_containers_of(host: str) -> list[str]:
    """Remove the containers of :func:`containers_of`, then the networks paddlecd made for them
    (label ``app.kubernetes.io/managed-by=paddlecd``, as ``--cluster local`` creates them) once no
    other container is attached; return the names removed."""
    removed, networks = [], set()
    for c in containers_of(host):
        networks.update(c.attrs.get("NetworkSettings", {}).get("Networks", {}))
        with contextlib.suppress(docker.errors.NotFound):
            c.remove(force=True)
            removed.append(c.name)
    for name in sorted(networks):
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            net = engine.client().networks.get(name)
            if net.attrs.get("Labels", {}).get(MANAGED_BY) == "paddlecd" and not net.containers:
                net.remove()
                removed.append(name)
    return removed


MANAGED_BY = "app.kubernetes.io/managed-by"  # cluster/render.py labels()


def remove_images_of(host: str) -> list[str]:
    """Remove the containers, then every image reference under ``host/``; return the references.
    The engine deletes an image's layers once its last reference is gone."""
    remove_containers_of(host)
    removed = []
    for ref in references_of(host):
        with contextlib.suppress(docker.errors.NotFound):
            engine.client().images.remove(ref, noprune=False)
            removed.append(ref)
    return removed

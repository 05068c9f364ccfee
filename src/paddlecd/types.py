"""Shared type aliases: one name per concept across the rooms (STYLE.md §18).

``Echo`` is every callback that receives one line of text: a command being run, a build or
push log line, a layer's progress, a promotion step. Byte-count progress is another concept:
``Transfer`` when a tool reports where a named download stands (the base bootstrap's packages and
wheels), ``paddlecd.artifacts.storage.Progress`` (``Callable[[int], None]``, bytes moved since the
last call) when paddlecd moves the bytes itself.

The other names are JSON documents whose shape a published format defines, passed between rooms
as parsed JSON rather than as a record type: the format is the type (each names its spec). They
are ``dict[str, Any]`` under a name; ``scripts/house_figures.py`` counts them as such.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

Echo = Callable[[str], None]
"""A sink for one line of text (no trailing newline); the CLI layer decides where it goes."""

Transfer = Callable[[str, int, int | None, float | None], None]
"""A sink for the byte progress of one named download: ``(name, bytes so far, bytes in all, at)``,
the total None while unknown, ``at`` the seconds on the tool's own clock when it said so (None:
now; BuildKit passes a step's output on in bursts, so the time a line arrives is not when it was
printed); called again with the same name as it advances."""

KubeObject: TypeAlias = dict[str, Any]
"""A Kubernetes API object as JSON (``apiVersion``, ``kind``, ``metadata``, ``spec``…), the way
the API server and ``kubectl apply -f`` read it (https://kubernetes.io/docs/reference/using-api/)."""

Statement: TypeAlias = dict[str, Any]
"""An in-toto Statement v1 as JSON (``_type``, ``subject``, ``predicateType``, ``predicate``;
https://github.com/in-toto/attestation, ``spec/v1/statement.md``), before it is signed."""

JsonSchema: TypeAlias = dict[str, Any]
"""A JSON Schema (draft 2020-12) document, as ``jsonschema`` validates with it."""

OciDocument: TypeAlias = dict[str, Any]
"""An OCI or Docker image manifest, index or image config as parsed JSON
(opencontainers/image-spec ``manifest.md``, ``image-index.md``, ``config.md``)."""

EngineInfo: TypeAlias = dict[str, Any]
"""The Docker engine's ``GET /info`` answer (``ServerVersion``, ``Runtimes``, ``DockerRootDir``…;
Docker Engine API, ``SystemInfo``)."""

ModelManifest: TypeAlias = dict[str, Any]
"""A stored model's ``manifest.json`` as parsed JSON, valid against
``schemas/artifact-manifest.schema.json`` (:func:`paddlecd.artifacts.manifest.validate_manifest`);
its canonical bytes are what a model's signature covers, so it stays the document."""

"""Build small OCI images straight into a registry with paddlecd's own client (no Docker Hub).

Each layer is a real gzip'd tar of random bytes, the config is a valid image config, so the engine
can pull the result too. Used by the registry and release integration tests.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile

from paddlecd.registry.client import OCI_INDEX, OCI_MANIFEST, RegistryClient


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _layer(size: int) -> tuple[bytes, str]:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo(f"data-{os.urandom(4).hex()}.bin")
        info.size = size
        tar.addfile(info, io.BytesIO(os.urandom(size)))
    return gzip.compress(raw.getvalue(), compresslevel=1), _sha(raw.getvalue())


def push_image(client: RegistryClient, repository: str, tag: str | None = None, *,
               layers: int = 2, layer_size: int = 4096, created: str | None = None,
               labels: dict[str, str] | None = None) -> str:
    """Upload a fresh random image to ``repository`` (tagged ``tag`` if given; its config's
    ``created`` time when given, RFC 3339, and its ``Labels``); return its digest."""
    blobs, diff_ids = [], []
    for _ in range(layers):
        blob, diff_id = _layer(layer_size)
        blobs.append(blob)
        diff_ids.append(diff_id)
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "config": {"Cmd": ["/bin/true"], **({"Labels": labels} if labels else {})},
                         "rootfs": {"type": "layers", "diff_ids": diff_ids},
                         **({"created": created} if created else {})}).encode()
    for blob in (config, *blobs):
        client.upload_blob(repository, _sha(blob), blob, len(blob))
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": _sha(config),
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": _sha(b),
                    "size": len(b),
                }
                for b in blobs
            ],
        }
    ).encode()
    return client.put_manifest(repository, tag or _sha(manifest), manifest, OCI_MANIFEST).digest


def push_index(client: RegistryClient, repository: str, tag: str) -> tuple[str, list[str]]:
    """Upload a two-platform OCI image index (amd64 + arm64 children); return (index digest, child
    digests)."""
    children = [push_image(client, repository, layers=1) for _ in range(2)]
    manifests = [
        {
            "mediaType": OCI_MANIFEST,
            "digest": d,
            "size": client.resolve(repository, d).size,
            "platform": {"architecture": arch, "os": "linux"},
        }
        for d, arch in zip(children, ("amd64", "arm64"))
    ]
    index = json.dumps(
        {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}
    ).encode()
    return client.put_manifest(repository, tag, index, OCI_INDEX).digest, children

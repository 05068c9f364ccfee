"""cosign's layouts of attestations on an image: the bundle referrer and the ``.att`` tag.

Both as cosign's source reads them (sigstore/cosign d6d86c22):

* **bundle referrer** (``WriteAttestationNewBundleFormat``, ``pkg/oci/remote/write.go``): an OCI
  1.1 artifact about the image, ``artifactType`` = the bundle media type, the empty config and
  exactly one layer, the bundle; annotations ``dev.sigstore.bundle.content: dsse-envelope``,
  ``dev.sigstore.bundle.predicateType`` and ``org.opencontainers.image.created``. Written with
  :func:`paddlecd.registry.referrers.push` (its ``sha256-<hex>`` index where the registry has no
  referrers API, which cosign also falls back to).
* **``.att`` tag** (``pkg/oci/remote/remote.go`` ``AttestationTag``): the image manifest tagged
  ``sha256-<hex>.att`` holds one layer per DSSE envelope, media type
  ``application/vnd.dsse.envelope.v1+json``, annotated ``dev.cosignproject.cosign/signature: ""``
  (a layer without it is rejected: ``pkg/oci/internal/signature/layer.go``) and
  ``predicateType``. A new envelope is appended to the layers already there, as cosign does; the
  tag is a read-modify-write, so each write reads back until its layer is listed.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from paddlecd.errors import NotFoundError, SignatureError
from paddlecd.registry import referrers
from paddlecd.registry.client import OCI_MANIFEST, Descriptor, RegistryClient

DSSE_TYPE = "application/vnd.dsse.envelope.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
SIGNATURE = "dev.cosignproject.cosign/signature"
PREDICATE = "predicateType"
BUNDLE_CONTENT = "dev.sigstore.bundle.content"
BUNDLE_PREDICATE = "dev.sigstore.bundle.predicateType"
CREATED = "org.opencontainers.image.created"


def att_tag(digest: str) -> str:
    """cosign's attestation tag of image ``digest``: ``sha256-<hex>.att``."""
    return referrers.tag_for(digest) + ".att"


def bundle_annotations(predicate_type: str, created: str) -> dict[str, str]:
    """The annotations of a bundle referrer's manifest, as cosign writes them."""
    return {BUNDLE_CONTENT: "dsse-envelope", BUNDLE_PREDICATE: predicate_type, CREATED: created}


@dataclass(frozen=True)
class AttLayer:
    """One envelope of an ``.att`` manifest: its ``data`` and the manifest's name for it."""

    data: bytes
    location: str


def read_att(client: RegistryClient, repository: str, digest: str) -> tuple[str, list[AttLayer]]:
    """The envelopes of ``digest``'s ``.att`` tag, and the tag's manifest digest.

    Returns:
        ``("", [])`` when there is no such tag.

    Raises:
        SignatureError: a layer lacks cosign's signature annotation or is not a DSSE envelope.
        RegistryError: the registry failed.
    """
    try:
        manifest = client.get_manifest(repository, att_tag(digest))
    except NotFoundError:
        return "", []
    where = f"{client.registry}/{repository}:{att_tag(digest)}@{manifest.descriptor.digest}"
    out = []
    for i, layer in enumerate(manifest.json().get("layers") or []):
        annotations = layer.get("annotations") or {}
        if layer.get("mediaType") != DSSE_TYPE or SIGNATURE not in annotations:
            raise SignatureError(
                f"layer {i} of {where} is no cosign attestation layer (media type "
                f"{layer.get('mediaType')!r}, annotation {SIGNATURE} "
                f"{'present' if SIGNATURE in annotations else 'missing'})",
                "cosign rejects such a layer too; re-attest with invoke verify",
            )
        out.append(AttLayer(referrers.read_blob(client, repository, layer["digest"]), where))
    return manifest.descriptor.digest, out


def write_att(client: RegistryClient, repository: str, digest: str, envelopes: list[bytes],
              predicate_type: str, rounds: int = 4) -> str:
    """Make ``digest``'s ``.att`` tag list every one of ``envelopes`` (appended to what it
    holds; created if missing).

    The tag is a read-modify-write: a writer that read it before another's PUT drops that entry.
    So each write reads back until its entries are listed, and a caller passes every envelope it
    knows of (verify: its own and those of the digest's other bundle referrers), so the next
    write restores an entry a concurrent one dropped.

    Returns:
        ``host/repo:sha256-<hex>.att@sha256:…`` of the manifest the tag holds after the write.

    Raises:
        RegistryError: the registry refused a blob or the manifest.
    """
    wanted = {}
    for envelope in envelopes:
        layer = _layer(hashlib.sha256(envelope).hexdigest(), len(envelope), predicate_type)
        if layer["digest"] not in wanted and not client.blob_exists(repository, layer["digest"]):
            client.upload_blob(repository, layer["digest"], envelope, len(envelope))
        wanted[layer["digest"]] = layer
    for _ in range(rounds):
        layers = _att_layers(client, repository, digest)
        missing = [x for d, x in wanted.items() if d not in {y["digest"] for y in layers}]
        if not missing:
            break
        _put_att(client, repository, digest, [*layers, *missing])
        time.sleep(random.uniform(0.005, 0.03))  # a concurrent writer's PUT lands; check again
    tag = att_tag(digest)
    return f"{client.registry}/{repository}:{tag}@{_att_digest(client, repository, digest)}"


def copy_att(dst: RegistryClient, src: RegistryClient, from_repo: str, to_repo: str,
             digest: str, manifest: str, *,
             ready: Callable[[], None] = lambda: None) -> Counter[str]:
    """Make ``to_repo``'s ``.att`` tag of ``digest`` hold every envelope of ``from_repo``'s
    ``.att`` manifest ``manifest`` (its digest: a manifest the lookup read costs no request).

    Blobs are mounted within one registry, streamed across; the manifest is written after
    ``ready`` (the image must be there first, as for a referrer).

    Returns:
        counts per outcome (``present``/``mounted``/``copied``) over blobs and the manifest.
    """
    counts: Counter[str] = Counter()
    source = src.get_manifest(from_repo, manifest)
    doc = source.json()
    have = _att_layers(dst, to_repo, digest)
    missing = [x for x in doc.get("layers") or [] if x["digest"] not in {h["digest"] for h in have}]
    # no tag there yet: the manifest's own bytes (and its config), as a copy of any image
    blobs = [*missing, *([] if have else [doc["config"]])]
    for x in blobs:
        if dst.host == src.host and dst.mount_blob(from_repo, to_repo, x["digest"]):
            counts["mounted"] += 1  # within one registry: mount without asking first
            continue
        counts[dst.copy_blob(src, from_repo, to_repo,
                             Descriptor(x["digest"], x["mediaType"], int(x["size"])))] += 1
    ready()
    if not missing:
        counts["present"] += 1
    elif not have:
        dst.put_manifest(to_repo, att_tag(digest), source.raw, OCI_MANIFEST)
        counts["copied"] += 1
    else:  # the release repository holds envelopes of its own: append, as a write does
        _put_att(dst, to_repo, digest, [*have, *missing])
        counts["copied"] += 1
    return counts


def _layer(hexdigest: str, size: int, predicate_type: str) -> dict[str, Any]:
    return {"mediaType": DSSE_TYPE, "digest": f"sha256:{hexdigest}", "size": size,
            "annotations": {SIGNATURE: "", PREDICATE: predicate_type}}


def _att_layers(client: RegistryClient, repository: str, digest: str) -> list[dict[str, Any]]:
    try:
        return client.get_manifest(repository, att_tag(digest)).json().get("layers") or []
    except NotFoundError:
        return []


def _att_digest(client: RegistryClient, repository: str, digest: str) -> str:
    return client.get_manifest(repository, att_tag(digest)).descriptor.digest


def _put_att(client: RegistryClient, repository: str, digest: str,
             layers: list[dict[str, Any]]) -> str:
    """Write the ``.att`` manifest of ``layers``: an OCI image whose config lists them as its
    rootfs, the shape go-containerregistry's ``mutate.AppendLayers`` gives cosign's."""
    config = json.dumps({
        "architecture": "", "os": "", "config": {}, "created": "0001-01-01T00:00:00Z",
        "history": [{"created": "0001-01-01T00:00:00Z"} for _ in layers],
        "rootfs": {"type": "layers", "diff_ids": [x["digest"] for x in layers]},
    }, separators=(",", ":")).encode()
    config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
    if not client.blob_exists(repository, config_digest):
        client.upload_blob(repository, config_digest, config, len(config))
    manifest = {
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)},
        "layers": layers,
    }
    raw = json.dumps(manifest, separators=(",", ":")).encode()
    return client.put_manifest(repository, att_tag(digest), raw, OCI_MANIFEST).digest

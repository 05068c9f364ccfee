"""Artifacts attached to an image: OCI 1.1 ``subject`` manifests and the referrers of a digest.

An artifact is an OCI image manifest with an ``artifactType``, the empty config
(``application/vnd.oci.empty.v1+json``, the two bytes ``{}``), its files as layers, and ``subject``
= the descriptor of the image it is about (image-spec 1.1, ``manifest.md`` "Guidelines for Artifact
Usage"). Its referrers are found the way distribution-spec 1.1 says ("Listing Referrers"):

* the referrers API, ``GET /v2/<name>/referrers/<digest>``, where the registry has it (it answers
  a manifest PUT carrying a ``subject`` with the ``OCI-Subject`` header, and the API with an index);
* else the referrers tag schema: the tag ``sha256-<hex>`` holds an OCI image index listing every
  referrer of that digest. CNCF distribution 2.8 (the embedded default) has no referrers API.

The tag schema is a read-modify-write of one tag, and distribution has no conditional PUT: two
writers at once can drop each other's entry (a test showed it). So, as the ledger does, every
artifact also gets a tag of its own, ``sha256-<subject hex>.<16 hex of the artifact digest>``,
written before the index and never rewritten: :func:`referrers` lists the index *and* those tags,
so no run is ever lost, and each write by :func:`push` re-adds any entry the index misses (it
converges). :func:`copy` (a promotion's, into a release repository holding a tag per release and
ledger record) adds only its own entry and lists no tags. HTTP goes
through :class:`~paddlecd.registry.client.RegistryClient`.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import tenacity
import urllib3

from paddlecd.errors import NotFoundError, RegistryAuthError, RegistryError
from paddlecd.registry.auth import scope
from paddlecd.registry.client import (
    OCI_INDEX,
    OCI_MANIFEST,
    Descriptor,
    RegistryClient,
    descriptors,
)
from paddlecd.registry.reference import check_digest

EMPTY_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY = b"{}"
EMPTY_DIGEST = "sha256:" + hashlib.sha256(EMPTY).hexdigest()
TITLE = "org.opencontainers.image.title"
MAX_BLOB = 8 << 20  # an artifact file read into memory (envelope, JUnit XML, log): 8 MiB at most


@dataclass(frozen=True)
class Layer:
    """One file of an artifact: its ``media_type``, bytes and file name (``title`` annotation)."""

    media_type: str
    data: bytes
    title: str

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` of the bytes."""
        return "sha256:" + hashlib.sha256(self.data).hexdigest()


@dataclass(frozen=True)
class Referrer:
    """A referrer's descriptor as the referrers index lists it (distribution-spec 1.1).

    Attributes:
        digest, size: of the artifact manifest (bytes). artifact_type: its ``artifactType``.
        annotations: the manifest's annotations (a hint for listing; never trusted for a decision).
    """

    digest: str
    size: int
    artifact_type: str
    annotations: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The OCI descriptor of the manifest, with ``artifactType`` and ``annotations``."""
        out: dict[str, Any] = {
            "mediaType": OCI_MANIFEST,
            "digest": self.digest,
            "size": self.size,
            "artifactType": self.artifact_type,
        }
        return {**out, "annotations": dict(self.annotations)} if self.annotations else out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Referrer:
        """Parse an index entry (``artifactType`` may be missing in foreign entries)."""
        return cls(
            data["digest"],
            int(data.get("size", 0)),
            data.get("artifactType", ""),
            dict(data.get("annotations") or {}),
        )


def tag_for(digest: str) -> str:
    """The referrers tag schema's tag of ``digest``: ``sha256-<hex>``."""
    return check_digest(digest).replace(":", "-", 1)


def own_tag(subject: str, digest: str) -> str:
    """The own tag of one artifact about ``subject``: ``sha256-<subject hex>.<16 hex of it>``."""
    return f"{tag_for(subject)}.{check_digest(digest)[7:23]}"


def artifact_manifest(
    subject: Descriptor, artifact_type: str, layers: list[Layer], annotations: dict[str, str]
) -> bytes:
    """The canonical bytes (sorted keys) of an artifact manifest about ``subject``."""
    doc = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": artifact_type,
        "config": {"mediaType": EMPTY_TYPE, "digest": EMPTY_DIGEST, "size": 2, "data": "e30="},
        "layers": [
            {
                "mediaType": x.media_type,
                "digest": x.digest,
                "size": len(x.data),
                "annotations": {TITLE: x.title},
            }
            for x in layers
        ],
        "subject": {
            "mediaType": subject.media_type,
            "digest": subject.digest,
            "size": subject.size,
        },
        "annotations": annotations,
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def push(
    client: RegistryClient,
    repository: str,
    subject: Descriptor,
    *,
    artifact_type: str,
    layers: list[Layer],
    annotations: dict[str, str],
) -> Referrer:
    """Upload ``layers`` and an artifact manifest whose ``subject`` is ``subject``, then list it as
    a
    referrer (the registry does it when it has the referrers API; else the ``sha256-<hex>`` index).

    Returns:
        the new :class:`Referrer` (its manifest is addressed by digest; no other tag is written).

    Raises:
        RegistryError: the registry refused a blob or the manifest (its answer is in the message).
    """
    raw = artifact_manifest(subject, artifact_type, layers, annotations)
    referrer = Referrer(
        "sha256:" + hashlib.sha256(raw).hexdigest(), len(raw), artifact_type, annotations
    )
    # Verify runs of one digest share the JUnit/log bytes at times (and always the empty config):
    # two writers uploading one blob at once make distribution refuse the other's manifest while
    # it rewrites the blob's link (MANIFEST_BLOB_UNKNOWN, tests/integration/test_attestation.py);
    # the write is idempotent, so it is done again, as copy() does.
    def write() -> None:
        for blob in (Layer(EMPTY_TYPE, EMPTY, ""), *layers):
            if not client.blob_exists(repository, blob.digest):
                client.upload_blob(repository, blob.digest, blob.data, len(blob.data))
        _put(client, repository, subject.digest, referrer, raw)

    _again_on_race(write)
    return referrer


def _again_on_race(write: Callable[[], None]) -> None:
    """Run the idempotent ``write`` up to :data:`_COPY_ATTEMPTS` times while the registry refuses
    it (not for auth: that is no race), 0.2 s more between each; the last refusal is raised."""
    for attempt in range(_COPY_ATTEMPTS):
        try:
            write()
            return
        except RegistryAuthError:
            raise
        except RegistryError:
            if attempt == _COPY_ATTEMPTS - 1:
                raise
            time.sleep(0.2 * (attempt + 1))


def _put(
    client: RegistryClient, repository: str, subject: str, referrer: Referrer, raw: bytes
) -> None:
    what = f"writing artifact manifest {client.name(repository, referrer.digest)}"
    resp = client.request(
        "PUT",
        f"{repository}/manifests/{referrer.digest}",
        [scope(repository)],
        what,
        ok=(201,),
        data=raw,
        headers={"Content-Type": OCI_MANIFEST},
    )
    client.stats["manifest_puts"] += 1
    if resp.headers.get("OCI-Subject") != subject:  # no referrers API: the tag schema it is
        client.put_manifest(repository, own_tag(subject, referrer.digest), raw, OCI_MANIFEST)
        _add_to_tag_index(client, repository, subject, referrer)


def referrers(
    client: RegistryClient, repository: str, digest: str, artifact_type: str | None = None
) -> list[Referrer]:
    """Every referrer of ``digest`` in ``repository`` (of ``artifact_type`` when given), in order.

    Raises:
        RegistryError: the registry failed (a missing index or repository is just ``[]``).
    """
    what = f"listing referrers of {client.name(repository, digest)}"
    resp = client.request(
        "GET",
        f"{repository}/referrers/{check_digest(digest)}",
        [scope(repository)],
        what,
        ok=(200, 404),
        params={"artifactType": artifact_type} if artifact_type else None,
    )
    ctype = resp.headers.get("Content-Type", "").split(";")[0].strip()
    client.referrers_api = resp.status_code == 200 and ctype == OCI_INDEX
    if client.referrers_api:
        found = [Referrer.from_json(e) for e in index_entries(resp.json(), what, client.host)]
    else:  # 404: the registry has no referrers API (distribution 2.8), so the tag schema
        found = _tag_schema(client, repository, digest)
    return [r for r in found if artifact_type is None or r.artifact_type == artifact_type]


def _tag_schema(client: RegistryClient, repository: str, subject: str) -> list[Referrer]:
    """The ``sha256-<hex>`` index's entries, then any artifact with its own tag the index misses."""
    # the index and the tag list at once (one round trip, not two)
    index, tags = client.each(lambda c, read: read(c), [
        lambda c: _tag_index(c, repository, tag_for(subject)),
        lambda c: c.list_tags(repository),
    ])
    found = [Referrer.from_json(e) for e in index]
    listed = {r.digest[7:23] for r in found}
    prefix = tag_for(subject) + "."
    for tag in sorted(tags):
        if _own(tag, prefix) and tag[len(prefix) :] not in listed:
            found.append(_referrer(client, repository, tag))
    return found


def _own(tag: str, prefix: str) -> bool:
    """True for an artifact's own tag (16 hex after ``sha256-<hex>.``), not cosign's ``.att``
    or ``.sig`` tags beside it."""
    rest = tag[len(prefix) :]
    return tag.startswith(prefix) and len(rest) == 16 and all(c in "0123456789abcdef" for c in rest)


def _referrer(client: RegistryClient, repository: str, reference: str) -> Referrer:
    manifest = client.get_manifest(repository, reference)
    doc = manifest.json()
    return Referrer(
        manifest.descriptor.digest,
        manifest.descriptor.size,
        doc.get("artifactType", ""),
        doc.get("annotations") or {},
    )


def _tag_index(client: RegistryClient, repository: str, tag: str) -> list[dict[str, Any]]:
    try:
        doc = client.get_manifest(repository, tag).json()
    except NotFoundError:
        return []
    return index_entries(doc, f"reading the index {client.name(repository, tag)}", client.host)


def index_entries(doc: Any, what: str, host: str) -> list[dict[str, Any]]:
    """The ``manifests`` of an OCI image index (image-spec image-index.md), checked to be
    descriptors (:func:`paddlecd.registry.client.descriptors`); null or absent: none.

    Raises:
        RegistryError: anything else, naming ``what`` and ``host``.
    """
    return descriptors(doc.get("manifests") if isinstance(doc, dict) else [],
                       f"{what} (from {host})")


def _add_to_tag_index(
    client: RegistryClient, repository: str, subject: str, referrer: Referrer, rounds: int = 3
) -> None:
    """Make the ``sha256-<hex>`` index list ``referrer`` and every other artifact with its own tag.

    Best effort by design: an entry a concurrent writer drops stays found through its own tag, and
    the next write puts it back in the index.
    """
    tag, prefix = tag_for(subject), tag_for(subject) + "."
    for _ in range(rounds):
        entries = _tag_index(client, repository, tag)
        have = {str(e.get("digest", ""))[7:23] for e in entries}
        own = {t[len(prefix) :] for t in client.list_tags(repository) if _own(t, prefix)}
        missing = [
            referrer
            if short == referrer.digest[7:23]
            else _referrer(client, repository, prefix + short)
            for short in sorted(own - have)
        ]
        if not missing:
            return
        index = {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [*entries, *(r.to_json() for r in missing)],
        }
        client.put_manifest(repository, tag, json.dumps(index, sort_keys=True).encode(), OCI_INDEX)
        # a concurrent writer that read the index before this PUT may overwrite it: let its PUT
        # land, then check again
        time.sleep(random.uniform(0.005, 0.03))


class _CutShort(Exception):
    """A blob answer that stopped early: ``got`` of ``size`` bytes (None: not announced)."""

    def __init__(self, got: int, size: int | None, why: str):
        super().__init__(why)
        self.got, self.size, self.why = got, size, why


def read_blob(client: RegistryClient, repository: str, digest: str, limit: int = MAX_BLOB) -> bytes:
    """The bytes of blob ``digest`` (at most ``limit`` bytes), checked against the digest.

    The body is read after the request returned (``stream=True``), so a read that stalls or is
    cut (fewer bytes than its Content-Length, a reset, a read timeout) is retried here as the
    transport retries a request (``client.retries`` attempts, tenacity's exponential wait) and
    then named as a cut-short answer, not as a digest mismatch (a trial: urllib3's
    ReadTimeoutError traceback in evidence.show, "the registry is corrupt or lying" when reset).

    Raises:
        NotFoundError: no such blob. RegistryError: too large, cut short on every attempt, or its
            bytes do not match the digest.
    """
    what = f"reading blob {client.name(repository, digest)}"
    path = f"{repository}/blobs/{check_digest(digest)}"
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(max(1, client.retries)), reraise=True,
        wait=tenacity.wait_exponential(multiplier=0.5, max=10),
        retry=tenacity.retry_if_exception_type(_CutShort))
    try:
        data = retrying(_read_once, client, path, repository, what, limit)
    except _CutShort as e:
        of = f" of {e.size}" if e.size is not None else ""
        raise RegistryError(f"{what}: the answer stopped after {e.got}{of} bytes ({e.why})",
                            f"{client.host} or a proxy between cut it short "
                            f"({max(1, client.retries)} attempts); check the network path and "
                            "re-run") from e
    if len(data) > limit:
        raise RegistryError(
            f"{what}: larger than {limit} bytes", "this is no artifact file paddlecd wrote"
        )
    if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
        raise RegistryError(
            f"{what}: its bytes do not match the digest", "the registry is corrupt or lying"
        )
    client.stats["bytes_downloaded"] += len(data)
    return data


def _read_once(client: RegistryClient, path: str, repository: str, what: str,
               limit: int) -> bytes:
    resp = client.request("GET", path, [scope(repository)], what, stream=True)
    announced = resp.headers.get("Content-Length")
    size = int(announced) if announced and announced.isdigit() else None
    data = bytearray()
    with resp:
        try:  # read1: what has arrived, so the bytes before a stall or reset are counted
            while len(data) <= limit and (chunk := resp.raw.read1(
                    min(1 << 16, limit + 1 - len(data)), decode_content=False)):
                data += chunk
        except (urllib3.exceptions.HTTPError, OSError) as e:  # ReadTimeoutError, ProtocolError
            text = str(e).lower()
            why = ("timed out" if isinstance(e, urllib3.exceptions.ReadTimeoutError)
                   else "connection reset" if "reset" in text
                   else "connection closed" if "incompleteread" in text or "closed" in text
                   else type(e).__name__)
            raise _CutShort(len(data), size, why) from e
    if size is not None and len(data) < min(size, limit + 1):
        raise _CutShort(len(data), size, "connection closed")
    return bytes(data)


_COPY_ATTEMPTS = 4


@dataclass
class _Batch:
    """What several copies about one subject share (:func:`copy_all`): the blobs known in the
    target repository, the target's ``sha256-<hex>`` index as read, and the entries it lacks."""

    present: set[str] = field(default_factory=set)
    subject: str = ""
    entries: list[dict[str, Any]] | None = None
    pending: list[Referrer] = field(default_factory=list)


def _copy_once(dst: RegistryClient, src: RegistryClient, from_repo: str, to_repo: str,
               manifest: Any, subject: str, referrer: Referrer, counts: Counter[str],
               ready: Callable[[], None], batch: _Batch | None = None) -> None:
    """One attempt of :func:`copy`: blobs (and the target's tag index) while the image is copied,
    then the manifest, its own tag and the index entry (with ``batch``: left to
    :func:`copy_all`, which writes the index once)."""

    def blob(client: RegistryClient, item: Descriptor | None) -> Any:
        if item is None:
            return _tag_index(client, to_repo, tag_for(subject))
        if client.host == src.host and client.mount_blob(from_repo, to_repo, item.digest):
            return "mounted"  # within one registry: mount without asking first
        return client.copy_blob(src, from_repo, to_repo, item)

    # the tag index is read meanwhile when the registry is known to lack the referrers API (the
    # lookup of the attestation just asked it), else only once a manifest PUT has said so
    without_api = dst.host == src.host and src.referrers_api is False
    if batch is not None and batch.entries is not None:
        without_api = False  # read by an earlier copy of the batch
    known = batch.present if batch is not None else set()
    children = [c for c in manifest.children() if c.digest not in known]
    counts["present"] += len(manifest.children()) - len(children)
    jobs: list[Descriptor | None] = [*([None] if without_api else []), *children]
    results: list[Any]
    if dst.host == src.host:  # a few mounts, a few at once (each is one round trip)
        results = dst.each(blob, jobs)
    else:  # streams from src: one at a time, src's client is not shared between threads
        results = [blob(dst, job) for job in jobs]
    entries = results.pop(0) if without_api else None
    counts.update(str(o) for o in results)
    known.update(c.digest for c in children)
    ready()
    what = f"writing artifact manifest {dst.name(to_repo, referrer.digest)}"
    resp = dst.request("PUT", f"{to_repo}/manifests/{referrer.digest}", [scope(to_repo)], what,
                       ok=(201,), data=manifest.raw, headers={"Content-Type": OCI_MANIFEST})
    dst.stats["manifest_puts"] += 1
    if resp.headers.get("OCI-Subject") == subject:
        return  # the registry lists it (referrers API)
    _write_tag_schema(dst, to_repo, manifest, subject, referrer, entries, batch)


def _write_tag_schema(dst: RegistryClient, to_repo: str, manifest: Any, subject: str,
                      referrer: Referrer, entries: list[dict[str, Any]] | None,
                      batch: _Batch | None) -> None:
    """For a registry without the referrers API: the referrer's own tag, and its entry in the
    subject's ``sha256-<hex>`` index (with ``batch``: left to :func:`copy_all`). ``entries``: the
    index as read meanwhile, or None."""
    # No tag listing here (the release repository has a tag per release and record):
    # only this entry is added; readers find any entry a concurrent writer dropped through its own
    # tag (_tag_schema), and the next verify's write puts it back in the index.
    if batch is not None and batch.entries is not None:
        entries = batch.entries
    if entries is None:
        entries = _tag_index(dst, to_repo, tag_for(subject))
    listed = {str(e.get("digest", "")) for e in entries}
    writes: list[tuple[str, bytes, str]] = [(own_tag(subject, referrer.digest), manifest.raw,
                                             OCI_MANIFEST)]
    if batch is not None:  # the index once, for every copy of the batch (copy_all)
        batch.subject, batch.entries = subject, entries
        if referrer.digest not in listed and referrer not in batch.pending:
            batch.pending.append(referrer)
    elif referrer.digest not in listed:
        index = {"schemaVersion": 2, "mediaType": OCI_INDEX,
                 "manifests": [*entries, referrer.to_json()]}
        writes.append((tag_for(subject), json.dumps(index, sort_keys=True).encode(), OCI_INDEX))
    # one after the other, the own tag first: distribution rewrites a manifest's link files in
    # place, so an index PUT that checks its entry while the same manifest is PUT under the own
    # tag fails (MANIFEST_BLOB_UNKNOWN; seen in benchmarks/bench_ledger.py)
    for w in writes:
        dst.put_manifest(to_repo, *w)


def copy_all(
    dst: RegistryClient, src: RegistryClient, from_repo: str, to_repo: str,
    digests: list[str], *, ready: Callable[[], None] = lambda: None,
) -> Counter[str]:
    """:func:`copy` of each artifact manifest of ``digests`` (all about one subject), one after
    the other, mounting a blob they share (the empty config) once and writing the target's
    ``sha256-<hex>`` index once for all of them: a promotion copies three or four referrers of
    its image, and each index read and write is a round trip and about 1.3 KiB (of the
    64 KiB a promotion may move).

    Returns:
        counts per outcome over every blob and manifest.

    Raises:
        RegistryError: as :func:`copy`, or the registry refused the index.
    """
    counts: Counter[str] = Counter()
    batch = _Batch()
    for digest in digests:
        counts += copy(dst, src, from_repo, to_repo, digest, ready=ready, batch=batch)
    if batch.pending and batch.entries is not None:
        index = {"schemaVersion": 2, "mediaType": OCI_INDEX,
                 "manifests": [*batch.entries, *(r.to_json() for r in batch.pending)]}
        dst.put_manifest(to_repo, tag_for(batch.subject),
                         json.dumps(index, sort_keys=True).encode(), OCI_INDEX)
    return counts


def copy(
    dst: RegistryClient, src: RegistryClient, from_repo: str, to_repo: str, digest: str, *,
    ready: Callable[[], None] = lambda: None, batch: _Batch | None = None,
) -> Counter[str]:
    """Copy the artifact manifest ``digest`` (and its blobs) from ``src``'s ``from_repo`` into
    ``to_repo`` of ``dst``, and list it there as a referrer of its ``subject``.

    The subject must be in ``to_repo`` when the manifest is written: ``ready`` is called after the
    blobs and before the manifest (a promotion copies the image meanwhile, and raises there when
    that failed). Blobs are mounted within one registry and streamed across registries
    (:meth:`RegistryClient.copy_blob`).

    Returns:
        counts per outcome (``present``/``mounted``/``copied``) over blobs and the manifest.

    Raises:
        RegistryError: ``digest`` is no artifact manifest with a subject, or the registry refused.
    """
    counts: Counter[str] = Counter()
    manifest = src.get_manifest(from_repo, digest)
    doc = manifest.json()
    subject = (doc.get("subject") or {}).get("digest")
    if not subject:
        raise RegistryError(
            f"{src.name(from_repo, digest)} has no subject: not an artifact about an image",
            "copy images with copy_image; referrers with this function",
        )
    if dst.host == src.host and from_repo == to_repo:
        return Counter(present=len(manifest.children()) + 1)
    referrer = Referrer(
        digest, manifest.descriptor.size, doc.get("artifactType", ""), doc.get("annotations") or {}
    )
    # Two promoters copying one attestation at once race inside distribution (a blob mounted by
    # one is not yet linked when the other's manifest PUT checks it: DIGEST_INVALID /
    # MANIFEST_BLOB_UNKNOWN, seen in tests/integration/test_release.py); the copy is idempotent,
    # so it is simply done again.
    def attempt() -> None:
        tried: Counter[str] = Counter()  # counted once the attempt went through
        _copy_once(dst, src, from_repo, to_repo, manifest, subject, referrer, tried, ready, batch)
        counts.update(tried)

    _again_on_race(attempt)
    counts["copied"] += 1
    return counts

"""The registry, behind one module (STYLE.md §1): a client for the OCI distribution API.

Only the protocol is hand-written (https://github.com/opencontainers/distribution-spec/blob/main/spec.md);
HTTP is ``requests``, retries are ``tenacity``. What it does, as crane's ``copy``/``tag`` do:
resolve a tag to a digest with the full manifest ``Accept`` list, GET/PUT manifests, HEAD blobs,
mount blobs across repositories of one registry (``POST …/blobs/uploads/?mount=&from=``), stream
blobs between registries only when the target lacks them. HTTP, retries, auth and the one
translation of requests exceptions and error statuses into :class:`~paddlecd.errors.RegistryError`
subclasses live in :mod:`paddlecd.registry.transport`; credentials in :mod:`paddlecd.registry.auth`.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal, TypeVar
from urllib.parse import quote, urljoin

from paddlecd.errors import (
    ConfigError,
    NotFoundError,
    PaddlecdError,
    RegistryAuthError,
    RegistryError,
    RegistryRateLimitError,
)
from paddlecd.registry.auth import check_helper, docker_config, env_credentials, scope
from paddlecd.registry.reference import (
    SHA256_DIGEST,
    Reference,
    check_digest,
    parse_reference,
)
from paddlecd.registry.transport import Sized, Transport
from paddlecd.types import Echo, OciDocument

__all__ = ["RegistryClient", "Descriptor", "Manifest", "Reference", "parse_reference", "client_for",
           "open_reference", "pin", "ACCEPT"]

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
INDEX_TYPES = frozenset({DOCKER_MANIFEST_LIST, OCI_INDEX})
# The config media types of a runnable image (OCI image-spec config.md; Docker's image v1): a
# manifest with another config (an attestation's application/vnd.oci.empty.v1+json) or an
# artifactType is an artifact, which no engine runs (image-spec manifest.md "Guidelines for
# Artifact Usage")
IMAGE_CONFIG_TYPES = frozenset({"application/vnd.oci.image.config.v1+json",
                                "application/vnd.docker.container.image.v1+json"})
ACCEPT = ", ".join((DOCKER_MANIFEST, DOCKER_MANIFEST_LIST, OCI_MANIFEST, OCI_INDEX))
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
BlobCopy = Literal["present", "mounted", "copied"]
T = TypeVar("T")
R = TypeVar("R")
# Requests one client keeps in flight at once (RegistryClient.each): a few, as crane's --jobs; a
# hosted registry's rate limit counts requests, not connections, so this adds none.
WIDTH = 4


def _read(repository: str) -> str:
    """The token scope of a read: ``pull`` only (read-only accounts must read)."""
    return scope(repository, "pull")


@dataclass(frozen=True)
class Descriptor:
    """What a manifest or blob is: ``digest`` (``sha256:…``), ``media_type``, ``size`` in bytes."""

    digest: str
    media_type: str
    size: int


@dataclass(frozen=True)
class Manifest:
    """A manifest's exact bytes (``raw``; its sha256 is the digest) and its descriptor."""

    descriptor: Descriptor
    raw: bytes

    def json(self) -> OciDocument:
        """The parsed manifest."""
        return json.loads(self.raw)

    def artifact_type(self) -> str | None:
        """None for an image (or an index of them); else what the manifest is instead: its
        ``artifactType``, or its config's media type (e.g. a Sigstore bundle referrer)."""
        if self.is_index:
            return None
        doc = self.json()
        config = (doc.get("config") or {}).get("mediaType") if isinstance(
            doc.get("config"), dict) else None
        if doc.get("artifactType"):
            return str(doc["artifactType"])
        if config and config not in IMAGE_CONFIG_TYPES:
            return str(config)
        return None

    @property
    def is_index(self) -> bool:
        """True for a Docker manifest list or an OCI image index."""
        return self.descriptor.media_type in INDEX_TYPES

    def children(self) -> list[Descriptor]:
        """Child manifests of an index, else the config and layer blobs of an image manifest."""
        doc = self.json()
        what = f"manifest {self.descriptor.digest}"
        if self.is_index:
            items = descriptors(doc.get("manifests"), what)
        else:
            items = descriptors([doc["config"]] if doc.get("config") else [], what)
            items += descriptors(doc.get("layers"), what)
        return [Descriptor(d["digest"], str(d.get("mediaType", "")), d.get("size", 0))
                for d in items]


class RegistryClient(Transport):
    """The distribution API of one registry: manifests, tags, blobs, mounts and copies.

    Args: as :class:`paddlecd.registry.transport.Transport` (registry, ca_file, insecure,
    credentials, retries, timeout).

    Attributes:
        stats: counters of what crossed the wire: ``blob_mounts``, ``blob_uploads``,
            ``bytes_uploaded``, ``manifest_puts``, ``requests``.
    """

    _manifests: dict[tuple[str, str], Manifest]
    # Whether the registry answered the referrers API (distribution-spec 1.1), once asked
    # (paddlecd.registry.referrers sets it; twins inherit it): None until then.
    referrers_api: bool | None = None

    def twin(self) -> RegistryClient:
        """A client for the same registry to use from another thread: its own HTTP session and
        ``stats`` (add them back with ``stats.update``), the same credentials, tokens and manifest
        cache (dicts, whose single operations are atomic), so it needs no new login.

        Used to overlap independent requests (promotion time is round trips).
        """
        other = copy.copy(self)
        other.session = type(self.session)()
        other.stats = Counter()
        other._manifests = self._cache()
        other.__dict__["_twins"] = []
        return other

    def each(self, fn: Callable[[RegistryClient, T], R], items: Iterable[T],
             width: int = WIDTH) -> list[R]:
        """``fn(client, item)`` for every item, up to ``width`` at once, in order.

        Each thread has a client of its own (this one and twins it keeps, so their connections
        are reused by the next call); a round trip per item becomes one per ``width`` items. The
        twins' ``stats`` are added to this client's.

        Raises:
            the error of a failed item (a thread stops at its first; the first thread's error is
            raised once every thread has stopped).
        """
        todo = list(items)
        if len(todo) <= 1 or width <= 1:
            return [fn(self, item) for item in todo]
        twins = self.__dict__.setdefault("_twins", [])
        while len(twins) < min(width, len(todo)) - 1:
            twins.append(self.twin())
        clients = [self, *twins[: min(width, len(todo)) - 1]]

        def run(k: int, client: RegistryClient) -> list[tuple[int, R]]:
            return [(i, fn(client, todo[i])) for i in range(k, len(todo), len(clients))]

        with ThreadPoolExecutor(len(clients)) as pool:
            futures = [pool.submit(run, k, c) for k, c in enumerate(clients)]
        for twin in clients[1:]:
            self.stats.update(twin.stats)
            twin.stats.clear()
        done = dict(pair for f in futures for pair in f.result())
        return [done[i] for i in range(len(todo))]

    def _cache(self) -> dict[tuple[str, str], Manifest]:
        if "_manifests" not in self.__dict__:
            self._manifests = {}
        return self._manifests

    # ------------------------------------------------------------------ manifests

    def resolve(self, repository: str, reference: str) -> Descriptor:
        """Resolve a tag (or digest) to the manifest's descriptor: HEAD, falling back to GET.

        Raises:
            NotFoundError: no such repository or tag. RegistryAuthError: 401/403. RegistryError:
                other.
            ConfigError: ``reference`` is the digest of a blob (an image ID), not of a manifest.
        """
        what = f"resolving {self.name(repository, reference)}"
        resp = self._manifest_request("HEAD", repository, reference, what, ok=(200, 405))
        digest, ctype = (
            resp.headers.get("Docker-Content-Digest"),
            resp.headers.get("Content-Type", ""),
        )
        # a digest reference is its own answer: a header naming another digest (a proxy, a
        # lying registry) is never taken; the GET checks the bytes against the reference (a
        # trial: verify --image repo@D verified and signed the image the header named)
        same = not reference.startswith("sha256:") or digest == reference
        # a header that is no digest is never taken either (a trial: lock wrote "sha256:xyz"
        # from it, then refused its own file; render said "invalid digest" as if typed)
        well_formed = bool(digest) and SHA256_DIGEST.fullmatch(digest) is not None
        if resp.status_code == 200 and well_formed and ctype and same:
            return Descriptor(
                digest, ctype.split(";")[0].strip(), int(resp.headers.get("Content-Length", 0))
            )
        return self.get_manifest(repository, reference).descriptor

    def get_manifest(self, repository: str, reference: str) -> Manifest:
        """GET a manifest by tag or digest; its bytes are checked against a digest reference.

        A manifest read by digest is kept by this client (content-addressed, so it cannot change):
        asking again costs no request.

        Raises:
            NotFoundError, RegistryAuthError, RegistryError: as :meth:`resolve`; also on a digest
                mismatch.
        """
        by_digest = reference.startswith("sha256:")
        if by_digest and (repository, reference) in self._cache():
            # a manifest addressed by digest never changes: this client asks for it once
            return self._cache()[(repository, reference)]
        what = f"fetching manifest {self.name(repository, reference)}"
        resp = self._manifest_request("GET", repository, reference, what)
        raw = resp.content
        digest = "sha256:" + hashlib.sha256(raw).hexdigest()
        # the transport's reader: a body that is no JSON is named (exit 5), before the digest
        # (trial 19: a proxy's sign-in page, HTTP 200, was "content digest … does not match")
        doc = resp.json()
        if by_digest and reference != digest:
            raise RegistryError(
                f"{what}: content digest {digest} does not match",
                "the registry is corrupt or lying",
            )
        ctype = resp.headers.get("Content-Type", "").split(";")[0].strip()
        if not isinstance(doc, dict):  # a trial: "{not json" was a JSONDecodeError traceback
            raise RegistryError(f"{what}: HTTP {resp.status_code} from {self.host} is not a "
                                f"manifest (JSON {type(doc).__name__}, not an object)",
                                f"check {self.host} is the registry and nothing between "
                                "rewrites its answers")
        media_type = doc.get("mediaType") or ctype
        manifest = Manifest(Descriptor(digest, media_type, len(raw)), raw)
        if by_digest:
            self._cache()[(repository, digest)] = manifest
        return manifest

    def image_labels(self, repository: str, digest: str) -> dict[str, str]:
        """The labels of image ``repository@digest`` from its config blob (``config.Labels``, OCI
        image-spec config); a multi-platform index is read through its first image.

        Raises:
            NotFoundError, RegistryAuthError, RegistryError: as :meth:`get_manifest`.
        """
        return dict((self.image_config(repository, digest).get("config") or {}).get("Labels")
                    or {})

    def image_config(self, repository: str, digest: str) -> OciDocument:
        """The config blob of image ``repository@digest``, parsed (OCI image-spec ``config.md``:
        ``created``, ``config.Labels``, ``rootfs``…); a multi-platform index is read through its
        first image.

        Raises:
            NotFoundError, RegistryAuthError, RegistryError: as :meth:`get_manifest`.
        """
        what = f"reading the config of {self.name(repository, digest)}"
        doc = self.get_manifest(repository, digest).json()
        children = descriptors(doc.get("manifests"), what)
        if children:
            doc = self.get_manifest(repository, children[0]["digest"]).json()
        config = descriptors([doc.get("config")] if doc.get("config") else [], what)
        if not config:
            raise RegistryError(f"{what}: the manifest has no config", "check the image")
        config = check_digest(config[0]["digest"])
        resp = self.request("GET", f"{repository}/blobs/{config}", [_read(repository)], what)
        got = "sha256:" + hashlib.sha256(resp.content).hexdigest()
        if got != config:  # content-addressed: checked before it is parsed (a trial: a blob
            raise RegistryError(f"{what}: blob {config} arrived as {got}",  # with its quotes
                                "the registry is corrupt or something between rewrites its "
                                "answers")  # stripped was a JSONDecodeError traceback)
        doc = resp.json()
        if not isinstance(doc, dict):
            raise RegistryError(f"{what}: the config blob is no JSON object", "check the image")
        return doc

    def _manifest_request(self, method: str, repository: str, reference: str, what: str,
                          ok: tuple[int, ...] = (200,)) -> Any:
        """A manifest read. A digest that fails is checked for being a blob instead: distribution
        answers ``manifests/<config digest>`` with HTTP 500 UNKNOWN ("free space")."""
        try:
            return self.request(method, f"{repository}/manifests/{reference}", [_read(repository)],
                                what, ok=ok, headers={"Accept": ACCEPT})
        except (RegistryAuthError, RegistryRateLimitError):
            raise
        except RegistryError:
            if reference.startswith("sha256:") and self._is_config_blob(repository, reference):
                raise image_id_error(f"{self.registry}/{repository}", reference) from None
            raise

    def _is_config_blob(self, repository: str, digest: str) -> bool:
        """Whether ``repository`` serves blob ``digest`` as an image config (a JSON object with
        ``rootfs``, OCI image-spec config.md), read up to 1 MiB: configs are a few KiB. A HEAD
        is not enough (a trial: a registry that answers 200 to every blob HEAD had each failed
        manifest read called an image ID). Any error reading it is a no."""
        try:
            resp = self.request("GET", f"{repository}/blobs/{digest}", [_read(repository)],
                                f"reading blob {self.name(repository, digest)}", stream=True)
            with resp:
                head = resp.raw.read(1 << 20, decode_content=True)
            doc = json.loads(head)
        except (PaddlecdError, OSError, ValueError):
            return False
        return isinstance(doc, dict) and "rootfs" in doc

    def put_manifest(
        self, repository: str, reference: str, raw: bytes, media_type: str
    ) -> Descriptor:
        """PUT manifest bytes under a tag or digest; the digest the registry reports must be
        sha256(raw).

        Raises:
            RegistryError: refused (e.g. MANIFEST_BLOB_UNKNOWN when a blob is missing) or digest
                changed.
        """
        what = f"writing manifest {self.name(repository, reference)}"
        resp = self.request("PUT", f"{repository}/manifests/{reference}", [scope(repository)], what,
                             ok=(201,), data=raw, headers={"Content-Type": media_type})
        expected = "sha256:" + hashlib.sha256(raw).hexdigest()
        got = resp.headers.get("Docker-Content-Digest", expected)
        if got != expected:
            raise RegistryError(
                f"{what}: the registry stored {got}, expected {expected}",
                "the registry rewrote the manifest",
            )
        self.stats["manifest_puts"] += 1
        self._read_back(repository, reference, expected, what)
        return Descriptor(expected, media_type, len(raw))

    def _read_back(self, repository: str, reference: str, expected: str, what: str) -> None:
        """The registry serves ``reference`` right after its 201: a write it answered but did
        not keep is named here, not later as another cause (a trial: "tags kept changing under
        this promotion", "claimed first by None", a verify that said done). One HEAD (the GET
        when HEAD names no digest). A tag served as another digest is no error here: another
        writer may have moved it since (a moving tag, the ledger head); the promotion's own
        check of its tags decides.

        Raises:
            RegistryError: nothing is served under ``reference``.
        """
        try:
            self.resolve(repository, reference)
        except NotFoundError:
            raise RegistryError(
                f"{what}: {self.registry} answered 201 but serves nothing under it "
                f"(expected {expected})",
                "the registry (or a proxy or cache in front of it) did not keep the write: check "
                "its storage and logs, then re-run the same command") from None

    def delete_manifest(self, repository: str, digest: str) -> None:
        """DELETE a manifest by digest; distribution also removes every tag naming it. Its blobs
        stay until the registry's garbage collection (``registry garbage-collect``).

        Raises:
            NotFoundError: no such manifest (already deleted).
            RegistryError: the registry refuses deletes (405 UNSUPPORTED: distribution's
                ``storage.delete.enabled`` is off, the default), or failed.
        """
        what = f"deleting {self.name(repository, digest)}"
        resp = self.request("DELETE", f"{repository}/manifests/{check_digest(digest)}",
                            [scope(repository, "*")], what, ok=(202, 405))
        if resp.status_code == 405:  # distribution-spec "Deleting Manifests": 405 when disabled
            raise RegistryError(
                f"{what}: {self.registry} refuses deletes (HTTP 405 UNSUPPORTED)",
                "enable them in the registry's config: storage.delete.enabled: true (distribution;"
                " env REGISTRY_STORAGE_DELETE_ENABLED=true), restart it, re-run")
        self._cache().pop((repository, digest), None)

    def list_tags(self, repository: str) -> list[str]:
        """All tags of ``repository`` (following ``Link`` pagination); ``[]`` if it does not exist
        yet."""
        tags: list[str] = []
        url: str | None = f"{repository}/tags/list?n=1000"
        what = f"listing tags of {self.registry}/{repository}"
        seen: set[str] = set()
        try:
            while url:
                resp = self.request("GET", url, [_read(repository)], what)
                page = _tags_of(resp, what, self.host)
                tags += page
                url = self._next_page(resp, what, seen, repository) if page else None
        except NotFoundError:
            return []
        return tags

    def _next_page(self, resp: Any, what: str, seen: set[str], repository: str) -> str | None:
        """The ``Link: <…>; rel="next"`` URL of a tag page of ``repository`` (OCI
        distribution-spec, "Listing Tags"), or None on the last page.

        Raises:
            RegistryError: the next page is on another host (credentials are sent to this
                registry only; a trial: its password went to the Link's host), or of another
                repository (a trial: another repository's tags were read as this one's ledger
                records), or is a page already read (a trial: a registry whose next page was
                the same page was listed for ever, silent).
        """
        from urllib.parse import urlsplit

        if "next" not in resp.links:
            return None
        url = urljoin(self.base, resp.links["next"]["url"])
        if not self.same_origin(url):
            raise RegistryError(f"{what}: the registry's next page is on another host "
                                f"({url[:120]})", "paddlecd follows pages of the registry's own "
                                "host only: check the registry and any proxy rewriting its Link "
                                "headers")
        if urlsplit(url).path != urlsplit(urljoin(self.base, f"{repository}/tags/list")).path:
            raise RegistryError(f"{what}: the registry's next page lists another repository "
                                f"({url[:120]})", "check the registry and any proxy rewriting "
                                "its Link headers")
        if url in seen:
            raise RegistryError(f"{what}: the registry's next page repeats a page already read "
                                f"({url[:120]})", "the registry's tag pagination loops: check "
                                "its version and logs")
        seen.add(url)
        return url

    def list_tags_after(self, repository: str, last: str, *, stop: str = "",
                        n: int = 100) -> tuple[list[str], bool]:
        """The tags of ``repository`` after ``last`` in lexical order, paged with ``n``/``last``
        and ``Link`` (OCI distribution-spec, "Listing Tags"), until no ``next`` link or a page
        ends at or past ``stop``.

        Returns:
            (tags, whole): ``whole`` is True when the registry ignored ``n``/``last`` and answered
            with every tag (distribution 2.8 does: seen as more than ``n`` tags, or a tag not
            after ``last``); those are returned as they are, in its order. ``([], False)`` when
            the repository does not exist.

        Raises:
            RegistryError: the registry failed.
        """
        tags: list[str] = []
        url: str | None = f"{repository}/tags/list?n={n}&last={quote(last, safe='')}"
        what = f"listing tags of {self.registry}/{repository} after {last}"
        seen: set[str] = set()
        try:
            while url:
                resp = self.request("GET", url, [_read(repository)], what)
                page = _tags_of(resp, what, self.host)
                if len(page) > n or any(t <= last for t in page):
                    return page, True
                tags += page
                last = page[-1] if page else last
                done = not page or (stop and last >= stop)
                url = None if done else self._next_page(resp, what, seen, repository)
        except NotFoundError:
            return [], False
        return tags, False

    # ------------------------------------------------------------------ blobs

    def blob_exists(self, repository: str, digest: str) -> bool:
        """True when ``repository`` has blob ``digest`` (HEAD)."""
        resp = self.request("HEAD", f"{repository}/blobs/{digest}", [_read(repository)],
                             f"checking blob {self.name(repository, digest)}", ok=(200, 404))
        return resp.status_code == 200

    def mount_blob(self, from_repo: str, to_repo: str, digest: str) -> bool:
        """Cross-repository mount (no bytes move). True when mounted (201); False when the registry
        answered 202 (upload needed; the opened upload is cancelled)."""
        resp = self.request("POST", f"{to_repo}/blobs/uploads/", [scope(to_repo), _read(from_repo)],
                             f"mounting {digest} from {from_repo} into {self.registry}/{to_repo}",
                             ok=(201, 202), params={"mount": digest, "from": from_repo})
        if resp.status_code == 201:
            self.stats["blob_mounts"] += 1
            return True
        if resp.headers.get("Location"):
            self.request("DELETE", urljoin(self.base, resp.headers["Location"]), [scope(to_repo)],
                          "cancelling an upload", ok=(204, 404))
        return False

    def upload_blob(self, repository: str, digest: str, data: bytes | BinaryIO, size: int) -> None:
        """Monolithic upload (POST then PUT ``?digest=``); ``data`` may be a stream of ``size``
        bytes.

        Raises:
            RegistryError: refused, e.g. DIGEST_INVALID when the bytes do not hash to ``digest``.
        """
        what = f"uploading {self.name(repository, digest)}"
        start = self.request(
            "POST", f"{repository}/blobs/uploads/", [scope(repository)], what, ok=(202,)
        )
        if not start.headers.get("Location"):  # a trial: KeyError: 'location' as the message
            raise RegistryError(f"{what}: {self.registry} answered 202 without the Location of "
                                "the upload (OCI distribution spec, \"Pushing blobs\")",
                                "the registry, or a proxy in front of it, dropped the header: "
                                "check what answers at " + self.base)
        location = urljoin(self.base, start.headers["Location"])
        body = data if isinstance(data, bytes) else Sized(data, size)
        self.request(
            "PUT",
            location,
            [scope(repository)],
            what,
            ok=(201,),
            params={"digest": digest},
            data=body,
            headers={"Content-Type": "application/octet-stream"},
            retry=isinstance(data, bytes),
        )
        self.stats["blob_uploads"] += 1
        self.stats["bytes_uploaded"] += size

    def copy_blob(
        self, source: RegistryClient, from_repo: str, to_repo: str, blob: Descriptor
    ) -> BlobCopy:
        """Make ``to_repo`` (here) hold ``blob`` from ``source``'s ``from_repo``, moving as little
        as possible.

        Returns:
            ``"present"`` (nothing to do), ``"mounted"`` (same registry, no bytes moved) or
            ``"copied"`` (streamed from ``source`` without touching disk).
        """
        if self.blob_exists(to_repo, blob.digest):
            return "present"
        if source.host == self.host and self.mount_blob(from_repo, to_repo, blob.digest):
            return "mounted"
        what = f"reading blob {source.name(from_repo, blob.digest)}"
        resp = source.request("GET", f"{from_repo}/blobs/{blob.digest}", [_read(from_repo)], what,
                              stream=True)
        with resp:
            size = int(resp.headers.get("Content-Length") or blob.size)
            self.upload_blob(to_repo, blob.digest, resp.raw, size)
        return "copied"

    def copy_image(
        self, source: RegistryClient, from_repo: str, digest: str, to_repo: str
    ) -> Counter[str]:
        """Copy manifest ``digest`` (and, recursively, its children and blobs) from ``source`` into
        ``to_repo`` here, addressed by digest only: no tag is written.

        Returns:
            counts per outcome (``present``/``mounted``/``copied``) over blobs and manifests.
        """
        counts: Counter[str] = Counter()
        manifest = source.get_manifest(from_repo, digest)
        if source.host == self.host and from_repo == to_repo:
            counts["present"] += 1
            return counts
        if manifest.is_index:
            for child in manifest.children():
                counts += self.copy_image(source, from_repo, child.digest, to_repo)
        elif source.host == self.host:  # HEAD + mount per blob, a few blobs at once
            counts.update(self.each(lambda c, b: c.copy_blob(source, from_repo, to_repo, b),
                                    manifest.children()))
        else:  # streamed from source, whose client is not shared between threads
            counts.update(self.copy_blob(source, from_repo, to_repo, b)
                          for b in manifest.children())
        try:
            self.resolve(to_repo, digest)
            counts["present"] += 1
        except NotFoundError:
            self.put_manifest(to_repo, digest, manifest.raw, manifest.descriptor.media_type)
            counts["copied"] += 1
        return counts


def descriptors(items: Any, what: str) -> list[dict[str, Any]]:
    """``items`` checked to be OCI content descriptors (image-spec descriptor.md): objects with
    a ``sha256:`` digest, a whole non-negative size, and when present a string media type and
    artifact type and string annotations; None: none.

    Raises:
        RegistryError: naming ``what`` (a trial: an index whose ``manifests`` was a string was a
            TypeError traceback in prune, compare and evidence.show).
    """
    if items is None:
        return []

    def ok(d: Any) -> bool:
        if not isinstance(d, dict) or not isinstance(d.get("digest"), str):
            return False
        size, notes = d.get("size", 0), d.get("annotations") or {}
        return (SHA256_DIGEST.fullmatch(d["digest"]) is not None
                and isinstance(size, int) and not isinstance(size, bool) and size >= 0
                and isinstance(d.get("mediaType", ""), str)
                and isinstance(d.get("artifactType", ""), str) and isinstance(notes, dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in notes.items()))

    if not isinstance(items, list) or not all(ok(d) for d in items):
        raise RegistryError(f"{what}: the registry's answer holds no OCI descriptors where it "
                            "should", "check the registry and that nothing between rewrites its "
                            "answers")
    return items


def _tags_of(resp: Any, what: str, host: str) -> list[str]:
    """The ``tags`` of a tag-list answer (a list of strings; null or absent: none).

    Raises:
        RegistryError: the answer is no tag list.
    """
    doc = resp.json()
    tags = doc.get("tags") if isinstance(doc, dict) else None
    if tags is None and isinstance(doc, dict):
        return []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise RegistryError(f"{what}: the answer of {host} is no tag list",
                            f"check {host} is the registry and nothing between rewrites its "
                            "answers")
    return tags


def client_for(settings: Any, registry: str | None = None, *,
               on_progress: Echo | None = None) -> RegistryClient:
    """A client for ``registry`` (default: ``settings.registry.url``) configured from Settings.

    The candidate registry uses ``registry.ca_file``/``registry.insecure``, a separate release
    registry ``release.ca_file``/``release.insecure``; other registries use TLS with the system CAs.
    A loopback registry (127.0.0.1, localhost) with no CA configured is spoken to over plain HTTP,
    as Docker treats loopback registries as insecure (the embedded registry). ``on_progress`` gets
    one line per rate-limit wait (``registry.rate_limit_wait`` bounds them, in seconds).

    Raises:
        ConfigError: Docker's config.json is unreadable or malformed (:func:`auth.docker_config`).
        RegistryAuthError: its credential helper for ``host`` is not on PATH
            (:func:`auth.check_helper`).
    """
    host = registry or settings.registry.url
    ca_file, insecure, section = None, False, None
    if host == settings.registry.url:
        ca_file, insecure, section = settings.registry.ca_file, settings.registry.insecure, \
            "registry"
    elif host == settings.release.registry:
        ca_file, insecure, section = settings.release.ca_file, settings.release.insecure, \
            "release"
    if not ca_file and host.rsplit(":", 1)[0] in LOOPBACK:
        insecure = True
    # PADDLECD_REGISTRY_USERNAME/PASSWORD belong to the configured registries: never send them to
    # another one (a base on Docker Hub, say); those use Docker's config.json / credential helpers
    # only.
    configured = host in (settings.registry.url, settings.release.registry)
    # Named up front, as engine.client() does: read only on the first 401, a broken file would let
    # a promotion on an open registry go ahead and fail one behind auth half-way
    docker_config()
    if not (configured and env_credentials()):  # the env pair is used before any helper
        check_helper(host)
    return RegistryClient(
        host,
        ca_file=ca_file,
        insecure=insecure,
        retries=settings.registry.push_retries,
        env_credentials=configured,
        on_progress=on_progress,
        rate_limit_wait=settings.registry.rate_limit_wait,
        settings_section=section,
    )


def image_id_error(name: str, digest: str, pushed: list[str] | None = None) -> ConfigError:
    """The refusal of ``digest`` that names a blob (an image ID) where a manifest digest belongs;
    ``name`` is ``host/repository``.

    The hint is the manifest digest the engine recorded for that image after a push or pull
    (``pushed``: its ``RepoDigests``, from :func:`paddlecd.engine.refuse_image_id`) when given;
    otherwise how to find it.
    """
    pushed = pushed or []
    best = next((p for p in pushed if p.startswith(name + "@")), pushed[0] if pushed else None)
    hint = (f"use the manifest digest the push gave it: {best}" if best else
            "use the manifest digest push printed (docker inspect --format "
            "'{{join .RepoDigests \"\\n\"}}' IMAGE), not the image ID (.Id)")
    return ConfigError(f"{name}@{digest} names an image ID (the config blob's digest, docker "
                       "inspect .Id), not a manifest digest", hint)


def pin(settings: Any, image: str) -> Reference:
    """``image`` as ``host/repo@sha256:…`` of a manifest the registry serves (tag resolved once).

    A blob digest (an image ID) is refused by the registry lookup; a caller holding a user's
    digest asks the local engine first (:func:`paddlecd.engine.refuse_image_id`), whose refusal
    names the digest push gave.

    Raises:
        ConfigError: malformed, or an image ID. NotFoundError: the registry lacks it. RegistryError.
    """
    client, ref = open_reference(settings, image)
    desc = client.resolve(ref.repository, ref.identifier)
    return ref.by_digest(desc.digest)


def open_reference(settings: Any, ref: str) -> tuple[RegistryClient, Reference]:
    """Parse ``ref`` and return a client for its registry (see :func:`client_for`) with the
    Reference.

    Raises:
        ConfigError: ``ref`` is malformed.
    """
    parsed = parse_reference(ref)
    return client_for(settings, parsed.registry), parsed

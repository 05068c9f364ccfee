"""The registry, behind one module (STYLE.md §1): a client for the OCI distribution API.

Only the protocol is hand-written (https://github.com/opencontainers/distribution-spec/blob/main/spec.md);
HTTP is ``requests``, retries are ``tenacity``. What it does, as crane's ``copy``/``tag`` do:
resolve a tag to a digest with the full manifest ``Accept`` list, GET/PUT manifests, HEAD blobs,
mount blobs across repositories of one registry (``POST …/blobs/uploads/?mount=&from=``), stream
blobs between registries only when the target lacks them. Requests exceptions and error statuses are
translated here, once, into :class:`~paddlecd.errors.RegistryError` subclasses.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal
from urllib.parse import urljoin

import requests
import tenacity

from .errors import NotFoundError, RegistryAuthError, RegistryError
from .reference import DOCKER_HUB, DOCKER_HUB_API, Reference, check_digest, parse_reference
from .registry_auth import Credentials, find_credentials, parse_challenge, scope, token_params

__all__ = ["RegistryClient", "Descriptor", "Manifest", "Reference", "parse_reference", "client_for", "open_reference", "ACCEPT"]

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
INDEX_TYPES = frozenset({DOCKER_MANIFEST_LIST, OCI_INDEX})
ACCEPT = ", ".join((DOCKER_MANIFEST, DOCKER_MANIFEST_LIST, OCI_MANIFEST, OCI_INDEX))
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
BlobCopy = Literal["present", "mounted", "copied"]


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

    def json(self) -> dict[str, Any]:
        """The parsed manifest."""
        return json.loads(self.raw)

    @property
    def is_index(self) -> bool:
        """True for a Docker manifest list or an OCI image index."""
        return self.descriptor.media_type in INDEX_TYPES

    def children(self) -> list[Descriptor]:
        """Child manifests of an index, else the config and layer blobs of an image manifest."""
        doc = self.json()
        items = doc.get("manifests", []) if self.is_index else [doc.get("config"), *doc.get("layers", [])]
        return [Descriptor(d["digest"], d.get("mediaType", ""), int(d.get("size", 0))) for d in items if d]


class _Retryable(Exception):
    """A 429 or 5xx answer: retried with backoff, then reported from its response."""

    def __init__(self, response: requests.Response):
        super().__init__(response.status_code)
        self.response = response


def _wait(state: tenacity.RetryCallState) -> float:
    """Honour ``Retry-After`` (seconds, capped at 30); otherwise exponential backoff 0.5, 1, 2… ≤ 10 s."""
    exc = state.outcome.exception() if state.outcome else None
    after = exc.response.headers.get("Retry-After", "") if isinstance(exc, _Retryable) else ""
    if after.isdigit():
        return min(float(after), 30.0)
    return tenacity.wait_exponential(multiplier=0.5, max=10)(state)


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, requests.exceptions.SSLError):
        return False  # a certificate problem does not heal by retrying
    return isinstance(exc, (_Retryable, requests.ConnectionError, requests.Timeout))


class RegistryClient:
    """One registry (``host[:port]``), authenticated lazily on the first 401.

    Args:
        registry: ``host[:port]`` as in references; ``docker.io`` talks to ``registry-1.docker.io``.
        ca_file: PEM CA bundle to trust for TLS (default: system CAs).
        insecure: plain HTTP instead of HTTPS.
        credentials: explicit credentials; default :func:`paddlecd.registry_auth.find_credentials`.
        retries: attempts per request on 429/5xx/connection resets (tenacity, exponential backoff).
        timeout: seconds per connect/read.

    Attributes:
        stats: counters of what crossed the wire: ``blob_mounts``, ``blob_uploads``,
            ``bytes_uploaded``, ``manifest_puts``, ``requests``.
    """

    def __init__(self, registry: str, *, ca_file: str | None = None, insecure: bool = False,
                 credentials: Credentials | None = None, retries: int = 4, timeout: float = 60):
        self.registry = registry
        self.host = DOCKER_HUB_API if registry == DOCKER_HUB else registry
        self.base = f"{'http' if insecure else 'https'}://{self.host}/v2/"
        self.session = requests.Session()
        # Passed on every request: a session-level verify loses to $REQUESTS_CA_BUNDLE (psf/requests#3829).
        self.verify: str | bool = ca_file or True
        self.retries, self.timeout = max(1, retries), timeout
        self._credentials, self._looked_up = credentials, credentials is not None
        self._tokens: dict[frozenset[str], str] = {}
        self._basic = False
        self.stats: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"RegistryClient({self.base!r})"

    # ------------------------------------------------------------------ manifests

    def resolve(self, repository: str, reference: str) -> Descriptor:
        """Resolve a tag (or digest) to the manifest's descriptor: HEAD, falling back to GET.

        Raises:
            NotFoundError: no such repository or tag. RegistryAuthError: 401/403. RegistryError: other.
        """
        what = f"resolving {self._name(repository, reference)}"
        resp = self._request("HEAD", f"{repository}/manifests/{reference}", [scope(repository)], what,
                             ok=(200, 405), headers={"Accept": ACCEPT})
        digest, ctype = resp.headers.get("Docker-Content-Digest"), resp.headers.get("Content-Type", "")
        if resp.status_code == 200 and digest and ctype:
            return Descriptor(digest, ctype.split(";")[0].strip(), int(resp.headers.get("Content-Length", 0)))
        return self.get_manifest(repository, reference).descriptor

    def get_manifest(self, repository: str, reference: str) -> Manifest:
        """GET a manifest by tag or digest; its bytes are checked against a digest reference.

        Raises:
            NotFoundError, RegistryAuthError, RegistryError: as :meth:`resolve`; also on a digest mismatch.
        """
        what = f"fetching manifest {self._name(repository, reference)}"
        resp = self._request("GET", f"{repository}/manifests/{reference}", [scope(repository)], what,
                             headers={"Accept": ACCEPT})
        raw = resp.content
        digest = "sha256:" + hashlib.sha256(raw).hexdigest()
        if reference.startswith("sha256:") and reference != digest:
            raise RegistryError(f"{what}: content digest {digest} does not match", "the registry is corrupt or lying")
        ctype = resp.headers.get("Content-Type", "").split(";")[0].strip()
        media_type = json.loads(raw).get("mediaType") or ctype
        return Manifest(Descriptor(digest, media_type, len(raw)), raw)

    def put_manifest(self, repository: str, reference: str, raw: bytes, media_type: str) -> Descriptor:
        """PUT manifest bytes under a tag or digest; the digest the registry reports must be sha256(raw).

        Raises:
            RegistryError: refused (e.g. MANIFEST_BLOB_UNKNOWN when a blob is missing) or digest changed.
        """
        what = f"writing manifest {self._name(repository, reference)}"
        resp = self._request("PUT", f"{repository}/manifests/{reference}", [scope(repository)], what,
                             ok=(201,), data=raw, headers={"Content-Type": media_type})
        expected = "sha256:" + hashlib.sha256(raw).hexdigest()
        got = resp.headers.get("Docker-Content-Digest", expected)
        if got != expected:
            raise RegistryError(f"{what}: the registry stored {got}, expected {expected}", "the registry rewrote the manifest")
        self.stats["manifest_puts"] += 1
        return Descriptor(expected, media_type, len(raw))

    def delete_manifest(self, repository: str, digest: str) -> None:
        """DELETE a manifest by digest (the registry must allow deletes)."""
        self._request("DELETE", f"{repository}/manifests/{check_digest(digest)}", [scope(repository, "*")],
                      f"deleting {self._name(repository, digest)}", ok=(202,))

    def list_tags(self, repository: str) -> list[str]:
        """All tags of ``repository`` (following ``Link`` pagination); ``[]`` if it does not exist yet."""
        tags: list[str] = []
        url: str | None = f"{repository}/tags/list?n=1000"
        try:
            while url:
                resp = self._request("GET", url, [scope(repository)], f"listing tags of {self.registry}/{repository}")
                tags += resp.json().get("tags") or []
                url = urljoin(self.base, resp.links["next"]["url"]) if "next" in resp.links else None
        except NotFoundError:
            return []
        return tags

    # ------------------------------------------------------------------ blobs

    def blob_exists(self, repository: str, digest: str) -> bool:
        """True when ``repository`` has blob ``digest`` (HEAD)."""
        resp = self._request("HEAD", f"{repository}/blobs/{digest}", [scope(repository)],
                             f"checking blob {self._name(repository, digest)}", ok=(200, 404))
        return resp.status_code == 200

    def mount_blob(self, from_repo: str, to_repo: str, digest: str) -> bool:
        """Cross-repository mount (no bytes move). True when mounted (201); False when the registry
        answered 202 (upload needed; the opened upload is cancelled)."""
        resp = self._request("POST", f"{to_repo}/blobs/uploads/", [scope(to_repo), scope(from_repo, "pull")],
                             f"mounting {digest} from {from_repo} into {self.registry}/{to_repo}",
                             ok=(201, 202), params={"mount": digest, "from": from_repo})
        if resp.status_code == 201:
            self.stats["blob_mounts"] += 1
            return True
        if resp.headers.get("Location"):
            self._request("DELETE", urljoin(self.base, resp.headers["Location"]), [scope(to_repo)],
                          "cancelling an upload", ok=(204, 404))
        return False

    def upload_blob(self, repository: str, digest: str, data: bytes | BinaryIO, size: int) -> None:
        """Monolithic upload (POST then PUT ``?digest=``); ``data`` may be a stream of ``size`` bytes.

        Raises:
            RegistryError: refused, e.g. DIGEST_INVALID when the bytes do not hash to ``digest``.
        """
        what = f"uploading {self._name(repository, digest)}"
        start = self._request("POST", f"{repository}/blobs/uploads/", [scope(repository)], what, ok=(202,))
        location = urljoin(self.base, start.headers["Location"])
        body = data if isinstance(data, bytes) else _Sized(data, size)
        self._request("PUT", location, [scope(repository)], what, ok=(201,), params={"digest": digest},
                      data=body, headers={"Content-Type": "application/octet-stream"},
                      retry=isinstance(data, bytes))
        self.stats["blob_uploads"] += 1
        self.stats["bytes_uploaded"] += size

    def copy_blob(self, source: RegistryClient, from_repo: str, to_repo: str, blob: Descriptor) -> BlobCopy:
        """Make ``to_repo`` (here) hold ``blob`` from ``source``'s ``from_repo``, moving as little as possible.

        Returns:
            ``"present"`` (nothing to do), ``"mounted"`` (same registry, no bytes moved) or ``"copied"``
            (streamed from ``source`` without touching disk).
        """
        if self.blob_exists(to_repo, blob.digest):
            return "present"
        if source.host == self.host and self.mount_blob(from_repo, to_repo, blob.digest):
            return "mounted"
        what = f"reading blob {source._name(from_repo, blob.digest)}"
        resp = source._request("GET", f"{from_repo}/blobs/{blob.digest}", [scope(from_repo)], what, stream=True)
        with resp:
            size = int(resp.headers.get("Content-Length") or blob.size)
            self.upload_blob(to_repo, blob.digest, resp.raw, size)
        return "copied"

    def copy_image(self, source: RegistryClient, from_repo: str, digest: str, to_repo: str) -> Counter[str]:
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
        for child in manifest.children():
            if manifest.is_index:
                counts += self.copy_image(source, from_repo, child.digest, to_repo)
            else:
                counts[self.copy_blob(source, from_repo, to_repo, child)] += 1
        try:
            self.resolve(to_repo, digest)
            counts["present"] += 1
        except NotFoundError:
            self.put_manifest(to_repo, digest, manifest.raw, manifest.descriptor.media_type)
            counts["copied"] += 1
        return counts

    # ------------------------------------------------------------------ HTTP, auth, errors

    def _name(self, repository: str, reference: str) -> str:
        return f"{self.registry}/{repository}{'@' if reference.startswith('sha') else ':'}{reference}"

    @property
    def credentials(self) -> Credentials | None:
        """Credentials for this registry, looked up once (env, then Docker's config.json)."""
        if not self._looked_up:
            self._credentials, self._looked_up = find_credentials(self.registry), True
        return self._credentials

    def _request(self, method: str, path: str, scopes: list[str], what: str, *, ok: tuple[int, ...] = (200,),
                 retry: bool = True, **kwargs: Any) -> requests.Response:
        attempts = self.retries if retry else 1
        retrying = tenacity.Retrying(stop=tenacity.stop_after_attempt(attempts), wait=_wait,
                                     retry=tenacity.retry_if_exception(_transient), reraise=True)
        try:
            resp = retrying(self._send, method, path, scopes, kwargs)
        except _Retryable as e:
            resp = e.response
        except requests.exceptions.SSLError as e:
            raise RegistryError(f"{what}: TLS with {self.host} failed: {_short(e)}",
                                "set registry.ca_file (PADDLECD_REGISTRY_CA_FILE) to the registry's CA") from e
        except (requests.ConnectionError, requests.Timeout) as e:
            raise RegistryError(
                f"{what}: registry {self.host} unreachable: {_short(e)} — is it running? "
                "Docker Hub is not reachable from air-gapped test machines",
                "start it (scripts/stack.sh up) or check registry.url / PADDLECD_REGISTRY_URL") from e
        if resp.status_code not in ok:
            raise self._error(resp, what)
        return resp

    def _send(self, method: str, path: str, scopes: list[str], kwargs: dict[str, Any]) -> requests.Response:
        url = path if path.startswith(("http://", "https://")) else self.base + path
        extra = dict(kwargs)
        headers = dict(extra.pop("headers", {}))
        self.stats["requests"] += 1
        resp = self.session.request(method, url, headers={**headers, **self._auth(scopes)},
                                    timeout=self.timeout, verify=self.verify, **extra)
        if resp.status_code == 401 and self._authenticate(resp, scopes):
            self.stats["requests"] += 1
            resp = self.session.request(method, url, headers={**headers, **self._auth(scopes)},
                                        timeout=self.timeout, verify=self.verify, **extra)
        if resp.status_code == 429 or resp.status_code >= 500:
            raise _Retryable(resp)
        return resp

    def _auth(self, scopes: list[str]) -> dict[str, str]:
        creds = self.credentials
        if self._basic and creds:
            pair = base64.b64encode(f"{creds.username}:{creds.password}".encode()).decode()
            return {"Authorization": f"Basic {pair}"}
        token = self._tokens.get(frozenset(scopes))
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _authenticate(self, resp: requests.Response, scopes: list[str]) -> bool:
        """Answer a 401 challenge; False when there is nothing new to try (the 401 stands)."""
        challenge = parse_challenge(resp.headers.get("WWW-Authenticate", ""))
        if challenge.scheme == "basic":
            if self._basic or not self.credentials:
                return False
            self._basic = True
            return True
        if challenge.scheme == "bearer" and "realm" in challenge.params:
            self._tokens[frozenset(scopes)] = self._fetch_token(challenge, scopes)
            return True
        return False

    def _fetch_token(self, challenge: Any, scopes: list[str]) -> str:
        realm, creds = challenge.params["realm"], self.credentials
        try:
            if creds and creds.identity_token:  # OAuth2 refresh token stored by `docker login`
                resp = self.session.post(realm, timeout=self.timeout, verify=self.verify, data={
                    "grant_type": "refresh_token", "refresh_token": creds.password, "client_id": "paddlecd",
                    "service": challenge.params.get("service", ""), "scope": " ".join(scopes)})
            else:
                resp = self.session.get(realm, params=token_params(challenge, sorted(scopes)), timeout=self.timeout,
                                        verify=self.verify,
                                        auth=(creds.username, creds.password) if creds else None)
        except requests.RequestException as e:
            raise RegistryError(f"token service {realm} for {self.host} unreachable: {_short(e)}",
                                "check the network path to the registry's auth service") from e
        if resp.status_code in (401, 403):
            raise RegistryAuthError(f"{self.host}: the token service refused the credentials (HTTP {resp.status_code})",
                                    self._login_hint())
        body = resp.json() if resp.status_code == 200 else {}
        token = body.get("token") or body.get("access_token")
        if not token:
            raise RegistryError(f"{self.host}: the token service answered HTTP {resp.status_code} without a token",
                                "check the registry's auth configuration")
        return str(token)

    def _login_hint(self) -> str:
        return (f"run: docker login {self.registry} (or set PADDLECD_REGISTRY_USERNAME/PASSWORD); "
                "check the account may pull/push this repository")

    def _error(self, resp: requests.Response, what: str) -> RegistryError:
        codes = _error_codes(resp)
        detail = f"HTTP {resp.status_code}" + (f" {codes}" if codes else "")
        if resp.status_code in (401, 403):
            return RegistryAuthError(f"{what}: {self.host} denied access ({detail})", self._login_hint())
        if resp.status_code == 404:
            return NotFoundError(f"{what}: not found ({detail})", "check the repository, tag or digest")
        return RegistryError(f"{what}: {detail}", "re-run to retry; check the registry's logs and free space")


class _Sized:
    """A stream with a known length, so requests sends Content-Length instead of chunked encoding."""

    def __init__(self, raw: Any, size: int):
        self.raw, self.size = raw, size

    def __len__(self) -> int:
        return self.size

    def read(self, n: int = -1) -> bytes:
        if hasattr(self.raw, "stream"):  # urllib3 response: no transparent decompression of blobs
            return self.raw.read(None if n < 0 else n, decode_content=False)
        return self.raw.read(n)


def _error_codes(resp: requests.Response) -> str:
    """``CODE: message`` pairs from the spec's error body ``{"errors": [{code, message, detail}]}``."""
    try:
        errors = resp.json().get("errors") or []
    except ValueError:
        return ""
    return "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors if isinstance(e, dict))


def _short(e: Exception) -> str:
    text = str(e)
    for marker in ("Errno", "Connection refused", "certificate verify failed", "timed out"):
        if marker in text:
            return text[text.index(marker):].split("'")[0].rstrip(")]>, ")[:160]
    return text[:160]


def client_for(settings: Any, registry: str | None = None) -> RegistryClient:
    """A client for ``registry`` (default: ``settings.registry.url``) configured from Settings.

    The candidate registry uses ``registry.ca_file``/``registry.insecure``; other registries use TLS
    with the system CAs. A loopback registry (127.0.0.1, localhost) with no CA configured is spoken
    to over plain HTTP, as Docker treats loopback registries as insecure (the embedded registry).
    """
    host = registry or settings.registry.url
    ca_file, insecure = None, False
    if host == settings.registry.url:
        ca_file, insecure = settings.registry.ca_file, settings.registry.insecure
    if not ca_file and host.rsplit(":", 1)[0] in LOOPBACK:
        insecure = True
    return RegistryClient(host, ca_file=ca_file, insecure=insecure, retries=settings.registry.push_retries)


def open_reference(settings: Any, ref: str) -> tuple[RegistryClient, Reference]:
    """Parse ``ref`` and return a client for its registry (see :func:`client_for`) with the Reference.

    Raises:
        ConfigError: ``ref`` is malformed.
    """
    parsed = parse_reference(ref)
    return client_for(settings, parsed.registry), parsed

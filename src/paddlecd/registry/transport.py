"""HTTP for :mod:`paddlecd.registry.client`: one session per registry, retries, auth, error translation.

Retries (``tenacity``): 429, 5xx and connection resets/timeouts, exponential backoff 0.5 s … 10 s or
the server's ``Retry-After``; TLS failures are not retried. Auth: on a 401 the ``WWW-Authenticate``
challenge decides — ``Basic`` sends the credentials, ``Bearer`` fetches a token for the request's
scopes (:mod:`paddlecd.registry.auth`) — and the request is sent once more. Every ``requests``
exception and error status becomes one :class:`~paddlecd.errors.RegistryError` subclass here, with
the registry's error codes (``MANIFEST_UNKNOWN: …``) and a hint; secrets never enter a message.
"""

from __future__ import annotations

import base64
import re
from collections import Counter
from typing import Any

import requests
import tenacity

from paddlecd.errors import NotFoundError, RegistryAuthError, RegistryError
from paddlecd.registry.auth import Credentials, find_credentials, parse_challenge, token_params
from paddlecd.registry.reference import DOCKER_HUB, DOCKER_HUB_API


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


class Transport:
    """HTTP to one registry (``host[:port]``), authenticated lazily on the first 401.

    Args:
        registry: ``host[:port]`` as in references; ``docker.io`` talks to ``registry-1.docker.io``.
        ca_file: PEM CA bundle to trust for TLS (default: system CAs).
        insecure: plain HTTP instead of HTTPS.
        credentials: explicit credentials; default :func:`paddlecd.registry.auth.find_credentials`.
        retries: attempts per request on 429/5xx/connection resets (tenacity, exponential backoff).
        timeout: seconds per connect/read.

    Attributes:
        stats: counters of what crossed the wire (``requests`` here; the client adds more).
    """

    def __init__(self, registry: str, *, ca_file: str | None = None, insecure: bool = False,
                 credentials: Credentials | None = None, retries: int = 4, timeout: float = 60,
                 env_credentials: bool = True):
        self.registry = registry
        self.host = DOCKER_HUB_API if registry == DOCKER_HUB else registry
        self.base = f"{'http' if insecure else 'https'}://{self.host}/v2/"
        self.session = requests.Session()
        # Passed on every request: a session-level verify loses to $REQUESTS_CA_BUNDLE (psf/requests#3829).
        self.verify: str | bool = ca_file or True
        self.retries, self.timeout = max(1, retries), timeout
        self._credentials, self._looked_up = credentials, credentials is not None
        self._env_credentials = env_credentials  # PADDLECD_REGISTRY_* are for the configured registries only
        self._tokens: dict[frozenset[str], str] = {}
        self._basic = False
        self.stats: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base!r})"

    def name(self, repository: str, reference: str) -> str:
        """``registry/repository:tag`` or ``registry/repository@digest``, for messages."""
        return f"{self.registry}/{repository}{'@' if ':' in reference else ':'}{reference}"

    @property
    def credentials(self) -> Credentials | None:
        """Credentials for this registry, looked up once (env, then Docker's config.json)."""
        if not self._looked_up:
            environ = None if self._env_credentials else {}
            self._credentials, self._looked_up = find_credentials(self.registry, environ=environ), True
        return self._credentials

    def request(self, method: str, path: str, scopes: list[str], what: str, *, ok: tuple[int, ...] = (200,),
                retry: bool = True, **kwargs: Any) -> requests.Response:
        """Send one API request (``path`` under ``/v2/``, or an absolute URL) with auth and retries.

        Args:
            scopes: token scopes the request needs (``repository:<name>:pull,push``).
            what: the action, for error messages ("resolving host/repo:tag").
            ok: statuses that are success; any other becomes an error.
            retry: False for bodies that cannot be re-sent (streams).
            kwargs: passed to ``requests`` (``headers``, ``data``, ``params``, ``stream``).

        Raises:
            RegistryAuthError: 401/403. NotFoundError: 404. RegistryError: unreachable, TLS, other statuses.
        """
        attempts = self.retries if retry else 1
        retrying = tenacity.Retrying(stop=tenacity.stop_after_attempt(attempts), wait=_wait,
                                     retry=tenacity.retry_if_exception(_transient), reraise=True)
        try:
            resp = retrying(self._send, method, path, scopes, kwargs)
        except _Retryable as e:
            resp = e.response
        except requests.exceptions.SSLError as e:
            raise RegistryError(f"{what}: TLS with {self.host} failed: {_short(e)}",
                                "set registry.ca_file (PADDLECD_REGISTRY_CA_FILE) to the registry's CA; "
                                "a plain-HTTP registry needs registry.insecure=true") from e
        except (requests.ConnectionError, requests.Timeout) as e:
            hub = self.host.endswith("docker.io")
            raise RegistryError(
                f"{what}: registry {self.host} unreachable: {_short(e)}"
                + (" — Docker Hub cannot be reached from this machine" if hub else " — is it running?"),
                "lock on a machine that reaches the hub and commit images/lock.yaml, or mirror the base into your "
                "registry" if hub else
                "start it (scripts/stack.sh up) or check registry.url / release.registry (PADDLECD_*_URL)") from e
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
        creds = self.credentials
        if creds:
            return (f"{self.registry} rejected the credentials from {creds.source}: check them (docker login "
                    f"{self.registry} replaces config.json's), and that the account may pull/push this repository")
        return f"no credentials for {self.registry}: run docker login {self.registry} (or set PADDLECD_REGISTRY_USERNAME/PASSWORD)"

    def _error(self, resp: requests.Response, what: str) -> RegistryError:
        codes = _error_codes(resp)
        detail = f"HTTP {resp.status_code}" + (f" {codes}" if codes else "")
        if resp.status_code in (401, 403):
            return RegistryAuthError(f"{what}: {self.host} denied access ({detail})", self._login_hint())
        if resp.status_code == 404:
            return NotFoundError(f"{what}: not found ({detail})", "check the repository, tag or digest")
        return RegistryError(f"{what}: {detail}", "re-run to retry; check the registry's logs and free space")


class Sized:
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
    """The useful part of a requests/urllib3 exception text (they nest reprs several levels deep)."""
    text = str(e)
    errno = re.search(r"\[Errno (-?\d+)\] ([^'\"\])]+)", text)
    if errno:
        return f"{errno.group(2).strip().lower()} (errno {errno.group(1)})"
    for pattern in (r"certificate verify failed: [^'\"()\]]+", r"\[SSL: [A-Z_]+\][^'\"()]*",
                    r"(?:Read|Connect) timed out", r"[Tt]imed out"):
        found = re.search(pattern, text)
        if found:
            return found.group(0).strip()
    return text[:160]

"""HTTP for :mod:`paddlecd.registry.client`: one session per registry, retries, auth, error
translation.

Retries (``tenacity``) follow the status and OCI error code (:mod:`paddlecd.registry.answers`):
429, 500, 502–504 and connection resets/timeouts, exponential backoff 0.5 s … 10 s, at most
``retries`` attempts; TLS failures are not retried. A 429 or 503 with ``Retry-After`` (seconds or an
HTTP date, RFC 9110 §10.2.3) is waited out as the registry asks, within ``rate_limit_wait`` seconds
in total, with one progress line per wait; past that bound one
:class:`~paddlecd.errors.RegistryRateLimitError` names the registry's limit. Auth: on a
401 the ``WWW-Authenticate`` challenge decides: ``Basic`` sends the credentials, ``Bearer``
fetches a token for the request's scopes (:mod:`paddlecd.registry.auth`); then the request is
sent once more. Credentials from config.json are looked up only then. Every ``requests``
exception and error answer becomes one :class:`~paddlecd.errors.RegistryError` subclass here;
secrets never enter a message.
"""

from __future__ import annotations

import base64
import email.utils
import functools
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import requests
import tenacity
import urllib3
from requests.structures import CaseInsensitiveDict

from paddlecd import __version__
from paddlecd.errors import (
    ConfigError,
    RegistryAuthError,
    RegistryError,
    RegistryRateLimitError,
    network_reason,
)
from paddlecd.files import hide_userinfo, json_problem, regular_file
from paddlecd.registry import answers, auth
from paddlecd.registry.auth import Credentials, find_credentials, parse_challenge, token_params
from paddlecd.registry.reference import DOCKER_HUB, DOCKER_HUB_API
from paddlecd.types import Echo


def _check_ca(ca_file: str | bool, section: str | None = "registry") -> None:
    """Once TLS failed: name a CA file that cannot be the cause's cure (missing, unreadable, or
    no PEM certificate), which ssl reports as "HTTPSConnectionPool(...) Max retries exceeded".

    Raises:
        ConfigError: naming the file (missing, unreadable, or no ``BEGIN CERTIFICATE`` block).
    """
    if not isinstance(ca_file, str):
        return
    hint = f"point {answers.tls_settings(section)[0]} at the registry's CA certificate"
    try:
        with open(ca_file, "rb") as f:
            head = f.read(1 << 20)
    except OSError as e:
        raise ConfigError(f"registry CA file {ca_file}: {e.strerror}", hint) from e
    if b"-----BEGIN CERTIFICATE-----" not in head:
        raise ConfigError(f"registry CA file {ca_file} holds no PEM certificate "
                          "(-----BEGIN CERTIFICATE-----)", hint)

def _proxy_for(url: str) -> tuple[str, str] | None:
    """``(variable, proxy URL)`` of the proxy requests itself takes from the environment for
    ``url`` (its own NO_PROXY rules: a trial's ``127.0.0.1:5597`` entry was honoured by urllib's
    rules and not by requests'), the URL's user and password replaced by ``***`` (a secret
    never printed); None when it goes direct."""
    scheme = url.split(":", 1)[0]
    proxies = requests.utils.get_environ_proxies(url)
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy:
        return None
    name = next((n for n in (f"{scheme}_proxy", f"{scheme.upper()}_PROXY", "all_proxy",
                             "ALL_PROXY") if os.environ.get(n)), f"{scheme.upper()}_PROXY")
    return name, repr(hide_userinfo(proxy.strip()))[1:-1]  # a newline in it shown, not printed


class _Retryable(Exception):
    """An answer worth asking again (:func:`answers.retryable`); ``retry_after`` in seconds when the
    registry said how long to wait (429/503 with ``Retry-After``), else None."""

    def __init__(self, response: requests.Response, answer: answers.Answer):
        super().__init__(response.status_code)
        self.response, self.answer = response, answer
        header = response.headers.get("Retry-After", "")
        self.retry_after = retry_after(header) if response.status_code in (429, 503) else None


def retry_after(header: str, *, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds from now (delay-seconds or an HTTP date); None when invalid."""
    text = header.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _server_wait(exc: BaseException | None) -> float | None:
    """The wait the registry asked for, floored at 1 s so "Retry-After: 0" cannot spin."""
    after = exc.retry_after if isinstance(exc, _Retryable) else None
    return None if after is None else max(after, 1.0)


def _wait(state: tenacity.RetryCallState) -> float:
    """The registry's ``Retry-After`` when it gave one; otherwise exponential 0.5, 1, 2… ≤ 10 s."""
    after = _server_wait(state.outcome.exception() if state.outcome else None)
    if after is not None:
        return after
    return tenacity.wait_exponential(multiplier=0.5, max=10)(state)


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, requests.exceptions.SSLError):
        return False  # a certificate problem does not heal by retrying
    return isinstance(exc, (_Retryable, requests.ConnectionError, requests.Timeout, _BrokenOff))


# An answer whose body ends before its Content-Length, or whose encoding breaks: requests raises
# these while it reads the body, and they are OSErrors, which the catch site took for a path the
# user gave (a trial: exit 2, "check the path", no registry named).
_BrokenOff = (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError)


def _covers(have: Iterable[str], want: Iterable[str]) -> bool:
    """True when token scopes ``have`` grant every scope in ``want`` (``type:name:actions``)."""
    granted: dict[str, set[str]] = {}
    for s in have:
        kind_name, _, actions = s.rpartition(":")
        granted.setdefault(kind_name, set()).update(actions.split(","))
    for s in want:
        kind_name, _, actions = s.rpartition(":")
        got = granted.get(kind_name, set())
        if "*" not in got and not set(actions.split(",")) <= got:
            return False
    return True


class Transport:
    """HTTP to one registry (``host[:port]``), authenticated lazily on the first 401.

    Args:
        registry: ``host[:port]`` as in references; ``docker.io`` talks to ``registry-1.docker.io``.
        ca_file: PEM CA bundle to trust for TLS (default: system CAs).
        insecure: plain HTTP instead of HTTPS.
        credentials: explicit credentials; default :func:`paddlecd.registry.auth.find_credentials`.
        retries: attempts per request on 429/5xx/connection resets (tenacity, exponential backoff).
        timeout: seconds per connect/read.
        rate_limit_wait: seconds, in total per request, to wait out ``Retry-After`` answers.
        on_progress: called with one line per such wait (library code never prints).

    Attributes:
        stats: counters of what crossed the wire (``requests`` here; the client adds more).
    """

    def __init__(self, registry: str, *, ca_file: str | None = None, insecure: bool = False,
                 credentials: Credentials | None = None, retries: int = 4, timeout: float = 60,
                 env_credentials: bool = True, rate_limit_wait: float = 120.0,
                 on_progress: Echo | None = None, settings_section: str | None = "registry"):
        self.registry = registry
        self.host = DOCKER_HUB_API if registry == DOCKER_HUB else registry
        self.base = f"{'http' if insecure else 'https'}://{self.host}/v2/"
        self.session = requests.Session()
        # What every request carries, kept short: a promotion is ~60 requests and its bytes are
        # counted (benchmarks/bench_promote.py, <= 64 KiB). No content coding is asked for
        # (http.client then sends Accept-Encoding: identity: blobs are read raw and checked
        # against their digest), HTTP/1.1 connections persist without a Connection header
        # (RFC 9112 section 9.3), and a request without Accept takes any type (RFC 9110
        # section 12.5.1; manifest requests name theirs).
        self.session.headers = CaseInsensitiveDict({"User-Agent": f"paddlecd/{__version__}"})
        # Passed on every request: a session-level verify loses to $REQUESTS_CA_BUNDLE
        # (psf/requests#3829).
        self.verify: str | bool = ca_file or True
        if ca_file and not insecure:  # ssl would open a named pipe and wait for good (a trial)
            regular_file(Path(ca_file), "registry CA file")
        self.retries, self.timeout = max(1, retries), timeout
        self.settings_section = settings_section  # whose ca_file/insecure: tls_settings
        self.rate_limit_wait, self.on_progress = rate_limit_wait, on_progress
        self._env_credentials = (
            env_credentials  # PADDLECD_REGISTRY_* are for the configured registries only
        )
        # the env pair is checked now (a half-set pair is bad input even if no 401 ever comes);
        # config.json and its helpers are consulted on the first 401 only
        from_env = None if credentials or not env_credentials else auth.env_credentials()
        self._credentials = credentials or from_env
        self._looked_up = self._credentials is not None
        self._tokens: dict[frozenset[str], str] = {}
        self._basic = False
        self.stats: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base!r})"

    def name(self, repository: str, reference: str) -> str:
        """``registry/repository:tag`` or ``registry/repository@digest``, for messages."""
        return f"{self.registry}/{repository}{'@' if ':' in reference else ':'}{reference}"

    def check_api(self) -> None:
        """Check ``host`` serves the registry API: ``GET /v2/`` answers 200 (or 401, a login
        wanted), as the OCI distribution spec's end-1 has every registry do; a 404 there means
        "does not implement this specification". Used where a bare 404 (no body, as a HEAD
        brings) would otherwise be read as "no such manifest" (a trial: promote against a web
        server said "digest … is not in …").

        Raises:
            RegistryError: ``/v2/`` is not found; or ``host`` unreachable, TLS, other statuses.
        """
        what = f"checking {self.host} is a registry"
        if self.request("GET", "", [], what, ok=(200, 401, 404), retry=False).status_code == 404:
            raise RegistryError(
                f"{self.host} is no registry: GET /v2/ answered 404 (the OCI distribution spec "
                "has every registry answer 200 or 401 there)",
                "check registry.url / release.registry (PADDLECD_*_URL): host and port of the "
                "registry, not of another server")

    def same_origin(self, url: str) -> bool:
        """Whether ``url`` is on this registry's scheme, host and port (RFC 6454 origin)."""
        from urllib.parse import urlsplit

        mine, theirs = urlsplit(self.base), urlsplit(url)
        return (mine.scheme, mine.netloc) == (theirs.scheme, theirs.netloc.rpartition("@")[2])

    @property
    def authenticated(self) -> bool:
        """Whether a request of this client has been answered after a login (Basic credentials
        sent on a challenge, or a token fetched): a registry that never asked saw none."""
        return self._basic or bool(self._tokens)

    @property
    def credentials(self) -> Credentials | None:
        """Credentials for this registry, looked up once (env, then Docker's config.json)."""
        if not self._looked_up:
            environ = None if self._env_credentials else {}
            self._credentials, self._looked_up = (
                find_credentials(self.registry, environ=environ),
                True,
            )
        return self._credentials

    def request(
        self,
        method: str,
        path: str,
        scopes: list[str],
        what: str,
        *,
        ok: tuple[int, ...] = (200,),
        retry: bool = True,
        **kwargs: Any,
    ) -> requests.Response:
        """Send one API request (``path`` under ``/v2/``, or an absolute URL) with auth and retries.

        Args:
            scopes: token scopes the request needs (``repository:<name>:pull,push``).
            what: the action, for error messages ("resolving host/repo:tag").
            ok: statuses that are success; any other becomes an error.
            retry: False for bodies that cannot be re-sent (streams).
            kwargs: passed to ``requests`` (``headers``, ``data``, ``params``, ``stream``).

        Raises:
            RegistryAuthError: 401/403. NotFoundError: 404. RegistryError: unreachable, TLS, other
                statuses.
        """
        attempts = self.retries if retry else 1
        retrying = tenacity.Retrying(stop=self._stop(attempts, retry), wait=_wait, reraise=True,
                                     retry=tenacity.retry_if_exception(_transient),
                                     before_sleep=self._before_sleep)
        try:
            resp = retrying(self._send, method, path, scopes, kwargs)
        except _Retryable as e:
            raise self._gave_up(e, what, attempts) from None
        except requests.exceptions.SSLError as e:
            _check_ca(self.verify, self.settings_section)
            ca, plain = answers.tls_settings(self.settings_section)
            raise RegistryError(
                f"{what}: TLS with {self.host} failed: {_short(e)}",
                f"set {ca} to the registry's CA; a plain-HTTP registry needs {plain}"
                if self.settings_section else f"add the registry's CA to {ca}",
            ) from e
        except (requests.exceptions.ProxyError, requests.exceptions.InvalidURL,
                requests.exceptions.InvalidSchema) as e:
            proxy = _proxy_for(self.base)
            if not proxy:
                raise RegistryError(f"{what}: {_short(e)}", "check registry.url") from e
            # a trial: a refused or malformed HTTP(S)_PROXY read "registry … unreachable — is it
            # running?" (it was), or "Failed to parse" with the hint "check the path"
            raise RegistryError(
                f"{what}: the proxy {proxy[1]} ({proxy[0]}) failed: {_short(e)}",
                f"fix or unset {proxy[0]}, or add {self.host.rpartition(':')[0] or self.host} "
                "to NO_PROXY (a host without its port: requests matches no ip:port there)") from e
        except (requests.ConnectionError, requests.Timeout) as e:
            elsewhere = _redirected_to(e, self.host)
            if elsewhere:  # a trial: "registry R unreachable — is it running?" (R answered)
                raise RegistryError(
                    f"{what}: {self.host} redirected the request to {elsewhere}, which failed: "
                    f"{_short(e)}",
                    f"{elsewhere} is where the registry sends clients (its storage's redirect): "
                    "check that this machine reaches it, or the registry's storage redirect "
                    "settings") from e
            if isinstance(e, requests.exceptions.ReadTimeout):  # a trial: a registry that
                # answered slowly was "unreachable — is it running? start it"
                raise RegistryError(
                    f"{what}: {self.host} accepted the connection but did not answer within "
                    f"{self.timeout} s ({attempts} attempt(s)): {_short(e)}",
                    "the registry (or a proxy in front of it) is overloaded or stuck: check its "
                    "logs, then re-run the same command") from e
            if _hung_up(e):  # a trial: a reset read "unreachable … is it running?" (it was)
                raise RegistryError(
                    f"{what}: {self.host} accepted the connection, then broke it off: "
                    f"{_short(e)}",
                    "check the registry's logs and any proxy in between (is registry.url the "
                    "registry's port?), then run the command again") from e
            hub = self.host.endswith("docker.io")
            raise RegistryError(
                f"{what}: registry {self.host} unreachable: {_short(e)}"
                + (
                    " — Docker Hub cannot be reached from this machine"
                    if hub
                    else " — is it running?"
                ),
                "lock on a machine that reaches the hub and commit images/lock.yaml, "
                "or mirror the base into your registry"
                if hub
                else "start it (scripts/stack.sh up) or check registry.url / release.registry "
                "(PADDLECD_REGISTRY_URL / PADDLECD_RELEASE_REGISTRY)",
            ) from e
        except _BrokenOff as e:
            raise RegistryError(
                f"{what}: the answer from {self.host} broke off after {attempts} attempt(s): "
                f"{_short(e)}",
                "check the registry and any proxy in between, then run the command again",
            ) from e
        except requests.TooManyRedirects as e:
            raise RegistryError(f"{what}: {self.host} redirected the request round and round "
                                f"({_short(e)})", "check the registry's and any proxy's "
                                "redirects (registry.url the registry itself?)") from e
        except (urllib3.exceptions.HTTPError, requests.RequestException) as e:
            # a trial: two unequal Content-Length headers were "phase 'copy' failed: Content-
            # Length contained multiple unmatching values", hint "check the path"
            raise RegistryError(f"{what}: {self.host} sent an answer that is not valid HTTP: "
                                f"{_short(e)}",
                                "the answer is broken, not the request: check the registry and "
                                "any proxy in between") from e
        except OSError:  # requests: "Could not find a suitable TLS CA certificate bundle"
            _check_ca(self.verify, self.settings_section)
            raise
        if resp.status_code not in ok:
            raise self._error(resp, what)
        resp.json = functools.partial(_json_of, resp, what, self.host)  # type: ignore[method-assign]
        return resp

    def _stop(self, attempts: int, resendable: bool) -> Callable[[tenacity.RetryCallState], bool]:
        """Stop after ``attempts``; a wait the registry asked for is bounded by time instead."""
        def stop(state: tenacity.RetryCallState) -> bool:
            if not resendable:
                return True  # a body that cannot be sent again (a stream)
            after = _server_wait(state.outcome.exception() if state.outcome else None)
            if after is not None:
                return state.idle_for + after > self.rate_limit_wait
            return state.attempt_number >= attempts
        return stop

    def _before_sleep(self, state: tenacity.RetryCallState) -> None:
        after = _server_wait(state.outcome.exception() if state.outcome else None)
        if after is not None and self.on_progress:
            status = state.outcome.exception().response.status_code  # type: ignore[union-attr]
            left = self.rate_limit_wait - state.idle_for - after
            self.on_progress(f"{self.host} asks to wait (HTTP {status}, Retry-After): waiting "
                             f"{after:.0f} s, {left:.0f} s left of registry.rate_limit_wait")

    def _gave_up(self, e: _Retryable, what: str, attempts: int) -> RegistryError:
        """The error for an answer still retryable when retrying stopped."""
        rate_limited = e.answer.status == 429 or "TOOMANYREQUESTS" in e.answer.codes
        if not rate_limited and e.retry_after is None:
            return self._error(e.response, what, e.answer)
        limit = e.response.headers.get("RateLimit-Limit")
        named = f" (its limit: RateLimit-Limit {limit})" if limit else ""
        detail = f"HTTP {e.answer.status}" + (f" {e.answer.detail}" if e.answer.detail else "")
        if e.retry_after is not None:
            return RegistryRateLimitError(
                f"{what}: {self.host} rate limit{named}: {detail}, asks to wait "
                f"{e.retry_after:.0f} s more, past registry.rate_limit_wait="
                f"{self.rate_limit_wait:g} s", answers.RATE_LIMIT_HINT)
        return RegistryRateLimitError(f"{what}: {self.host} rate limit{named}: {detail} after "
                                      f"{attempts} attempts", answers.RATE_LIMIT_HINT)

    def _send(
        self, method: str, path: str, scopes: list[str], kwargs: dict[str, Any]
    ) -> requests.Response:
        url = path if path.startswith(("http://", "https://")) else self.base + path
        # credentials go to the registry's own origin only: a URL its answer named (a Location,
        # a Link) on another host gets none (a trial: a Link to another host received the
        # Basic password)
        ours = self.same_origin(url)
        extra = dict(kwargs)
        headers = dict(extra.pop("headers", {}))
        self.stats["requests"] += 1
        resp = self.session.request(method, url,
                                    headers={**headers, **(self._auth(scopes) if ours else {})},
                                    timeout=self.timeout, verify=self.verify, **extra)
        if ours and resp.status_code == 401 and self._authenticate(resp, scopes):
            self.stats["requests"] += 1
            resp = self.session.request(method, url, headers={**headers, **self._auth(scopes)},
                                        timeout=self.timeout, verify=self.verify, **extra)
        if resp.status_code >= 400:
            answer = _read(resp)
            if answers.retryable(answer):
                raise _Retryable(resp, answer)
        return resp

    def _auth(self, scopes: list[str]) -> dict[str, str]:
        creds = self.credentials if self._basic else None  # looked up on the first 401 only
        if creds:
            pair = base64.b64encode(f"{creds.username}:{creds.password}".encode()).decode()
            return {"Authorization": f"Basic {pair}"}
        token = self._tokens.get(frozenset(scopes)) or next(  # a push token covers a pull
            (t for have, t in self._tokens.items() if _covers(have, scopes)), None)
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _authenticate(self, resp: requests.Response, scopes: list[str]) -> bool:
        """Answer a 401 challenge; False when there is nothing new to try (the 401 stands)."""
        header = resp.headers.get("WWW-Authenticate", "")
        challenge = parse_challenge(header)
        if challenge.scheme == "basic":
            if self._basic or not self.credentials:
                return False
            self._basic = True
            return True
        if challenge.scheme == "bearer":
            realm = str(challenge.params.get("realm") or "")
            if not re.match(r"https?://[^/\s]", realm):  # the token auth spec's realm is a URL
                # a trial: realm= was "token service  unreachable: Invalid URL", no realm was
                # "no credentials: run docker login", neither of which login or a network fixes
                raise RegistryError(
                    f"{self.host} asked for a Bearer token, but its WWW-Authenticate names no "
                    f"http(s) realm ({header[:200]!r})",
                    "check the registry's (or a proxy's in front of it) token auth "
                    "configuration: the challenge needs realm=\"https://…\"")
            self._tokens[frozenset(scopes)] = self._fetch_token(challenge, scopes)
            return True
        return False

    def _fetch_token(self, challenge: Any, scopes: list[str]) -> str:
        realm, creds = challenge.params["realm"], self.credentials
        try:
            if creds and creds.identity_token:  # OAuth2 refresh token stored by `docker login`
                resp = self.session.post(
                    realm,
                    timeout=self.timeout,
                    verify=self.verify,
                    data={
                        "grant_type": "refresh_token",
                        "refresh_token": creds.password,
                        "client_id": "paddlecd",
                        "service": challenge.params.get("service", ""),
                        "scope": " ".join(scopes),
                    },
                )
            else:
                resp = self.session.get(
                    realm,
                    params=token_params(challenge, sorted(scopes)),
                    timeout=self.timeout,
                    verify=self.verify,
                    auth=(creds.username, creds.password) if creds else None,
                )
        except requests.RequestException as e:
            from urllib.parse import urlsplit

            elsewhere = _redirected_to(e, urlsplit(realm).netloc)
            if elsewhere:  # a trial: named the token service, which had answered
                raise RegistryError(f"token service {realm} for {self.host} redirected to "
                                    f"{elsewhere}, which failed: {_short(e)}",
                                    "check the registry's auth configuration and that this "
                                    f"machine reaches {elsewhere}") from e
            raise RegistryError(f"token service {realm} for {self.host} unreachable: {_short(e)}",
                                "check the network path to the registry's auth service") from e
        if resp.status_code == 400 and creds and creds.identity_token and \
                "invalid_grant" in resp.text[:2000]:  # RFC 6749 §5.2: the refresh token is dead
            raise RegistryAuthError(
                f"{self.host}: the token service refused the stored login (invalid_grant: an "
                "expired or revoked refresh token)", f"log in again: docker login {self.registry}")
        if resp.status_code in (401, 403):
            raise RegistryAuthError(
                f"{self.host}: the token service refused the credentials (HTTP {resp.status_code})",
                self._login_hint(),
            )
        if resp.status_code == 429:  # a trial: named an auth misconfiguration, not retried
            wait = resp.headers.get("Retry-After")
            raise RegistryRateLimitError(
                f"{self.host}: the token service {realm[:120]} is rate-limiting this machine "
                f"(HTTP 429{', Retry-After ' + wait[:40] if wait else ''})",
                answers.RATE_LIMIT_HINT)
        # a trial: a 200 with an SSO page was "Expecting value: line 1 column 1", exit 2 or 7
        body = _json_of(resp, f"token service {realm}", self.host) if resp.status_code == 200 \
            else {}
        token = (body.get("token") or body.get("access_token")) if isinstance(body, dict) else None
        if not token:
            raise RegistryError(
                f"{self.host}: the token service answered HTTP {resp.status_code} without a token",
                "check the registry's auth configuration",
            )
        if not isinstance(token, str) or not _B64TOKEN.fullmatch(token):
            # a trial: a token with a CR LF or a final newline was a traceback (or an error)
            # that printed it; never sent, never shown
            raise RegistryError(
                f"{self.host}: the token service {realm} answered a token that is no bearer "
                f"token ({len(str(token))} characters; RFC 6750 b64token: letters, digits and "
                "-._~+/ then =)", "check the registry's auth service (and any proxy before it)")
        return token

    def _login_hint(self) -> str:
        creds = self.credentials
        if creds:
            return (
                f"{self.registry} rejected the credentials from {creds.source}: check them "
                f"(docker login {self.registry} replaces config.json's), "
                "and that the account may pull/push this repository"
            )
        return (
            f"no credentials for {self.registry}: run docker login {self.registry} "
            "(or set PADDLECD_REGISTRY_USERNAME/PASSWORD)"
        )

    def _error(self, resp: requests.Response, what: str,
               answer: answers.Answer | None = None) -> RegistryError:
        return answers.to_error(answer or _read(resp), what=what, host=self.host,
                                login_hint=self._login_hint, section=self.settings_section)


class Sized:
    """A stream with a known length, so requests sends Content-Length instead of chunked
    encoding."""

    def __init__(self, raw: Any, size: int):
        self.raw, self.size = raw, size

    def __len__(self) -> int:
        return self.size

    def read(self, n: int = -1) -> bytes:
        if hasattr(self.raw, "stream"):  # urllib3 response: no transparent decompression of blobs
            return self.raw.read(None if n < 0 else n, decode_content=False)
        return self.raw.read(n)


def _read(resp: requests.Response) -> answers.Answer:
    """The error answer of ``resp`` (its body is read: error bodies are small)."""
    ctype = resp.headers.get("Content-Type", "")
    return answers.read_answer(resp.status_code, resp.content or b"", ctype)


# RFC 6750 §2.1: the token of an "Authorization: Bearer" header
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


def _redirected_to(e: Exception, host: str) -> str | None:
    """The ``host:port`` a failed request went to when it is not ``host``: a redirect the
    registry answered with (distribution redirects blob reads to its storage), or None."""
    from urllib.parse import urlsplit

    url = getattr(getattr(e, "request", None), "url", None)
    if not url:
        return None
    there = urlsplit(url).netloc.rpartition("@")[2]
    return there if there and there != host else None


def _hung_up(e: Exception) -> bool:
    """Whether ``e`` is a connection the server took and then reset or closed without an answer
    (urllib3's "Connection aborted." around ConnectionResetError or RemoteDisconnected), not
    one that was refused, timed out or never resolved."""
    return "Connection aborted." in str(e) and not isinstance(e, requests.Timeout)


def _short(e: Exception) -> str:
    """The useful part of a requests/urllib3 exception text (:func:`network_reason`)."""
    return network_reason(e)


def _json_of(resp: requests.Response, what: str, host: str, **kwargs: Any) -> Any:
    """``resp``'s JSON body, or a RegistryError naming the request when a 200 carries something
    else (a proxy's page, a cut body): ``json.JSONDecodeError`` alone named neither."""
    try:
        return requests.Response.json(resp, **kwargs)
    except ValueError as e:
        kind = resp.headers.get("Content-Type") or "no Content-Type"
        why = json_problem(e).removeprefix("not JSON").lstrip(": ")  # trial 21:
        why = why[1:-1] if why.startswith("(") and why.endswith(")") else why
        raise RegistryError(  # "Expecting value: line 1 column 1 (char 0)", json's own text
            f"{what}: HTTP {resp.status_code} from {host} is not valid JSON ({kind}, "
            f"{len(resp.content)} bytes; {why})",
            f"check {host} is the registry and nothing between rewrites its answers",
        ) from e

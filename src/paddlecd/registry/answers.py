"""What a registry's error answer means: HTTP status and OCI error code → one typed error and hint.

The decision comes from the status and the error codes of the spec's error body
``{"errors": [{"code", "message", "detail"}]}`` (opencontainers/distribution-spec ``spec.md``,
"Error Codes"; distribution adds ``TOOMANYREQUESTS`` and ``UNAVAILABLE``), never from the wording of
a message. A non-empty body that is not that JSON (an HTML page, plain text) was written
by something in front of the registry — a proxy or load balancer — and is reported as such; HTTP 413
is always a proxy's request-body cap (the registry itself answers ``SIZE_INVALID``).
Retry decisions use the same reading (:func:`retryable`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from paddlecd.errors import NotFoundError, RegistryAuthError, RegistryError, RegistryRateLimitError

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
RETRY_CODES = frozenset({"TOOMANYREQUESTS", "UNAVAILABLE"})
_LOGS = "check the registry's logs"
RATE_LIMIT_HINT = ("wait and re-run; authenticated clients usually get a higher limit (docker "
                   "login); registry.rate_limit_wait (PADDLECD_REGISTRY_RATE_LIMIT_WAIT) bounds "
                   "the wait, in s")

# OCI / distribution error code → (error type, hint). Codes not listed fall back to the status.
_CODES: dict[str, tuple[type[RegistryError], str]] = {
    "NAME_UNKNOWN": (NotFoundError, "the repository does not exist there: check its name"),
    "MANIFEST_UNKNOWN": (NotFoundError, "no such tag or digest there: check it (push prints the "
                                        "digest)"),
    "BLOB_UNKNOWN": (NotFoundError, "the repository lacks that blob: check the digest"),
    "MANIFEST_BLOB_UNKNOWN": (RegistryError, "the manifest names blobs the repository lacks: "
                                             "copy or push the blobs first, then re-run"),
    "NAME_INVALID": (RegistryError, "the registry refuses this repository name: lower-case "
                                    "[a-z0-9] components separated by . _ __ - and /"),
    "TAG_INVALID": (RegistryError, "tags are [A-Za-z0-9_][A-Za-z0-9._-]{0,127}"),
    "MANIFEST_INVALID": (RegistryError, "the registry refused the manifest: it may not accept this "
                                        "media type (OCI index or artifact)"),
    "MANIFEST_UNVERIFIED": (RegistryError, "the registry refused the manifest's signature"),
    "DIGEST_INVALID": (RegistryError, "the content does not hash to its digest: re-run; if it "
                                      "repeats, the source is corrupt"),
    "SIZE_INVALID": (RegistryError, "the content length differs from the declared size: a proxy "
                                    "may be rewriting the body; re-run"),
    "BLOB_UPLOAD_UNKNOWN": (RegistryError, "the upload session was lost (behind a load balancer: "
                                           "sticky sessions or shared storage); re-run"),
    "BLOB_UPLOAD_INVALID": (RegistryError, "the upload session was lost or broken; re-run"),
    "UNSUPPORTED": (RegistryError, "the registry does not support this operation here: a "
                                   "read-only registry or pull-through mirror refuses writes; a "
                                   "delete needs storage.delete.enabled in distribution"),
    "PAGINATION_NUMBER_INVALID": (RegistryError, "the registry refused the page size"),
    "TOOMANYREQUESTS": (RegistryRateLimitError, RATE_LIMIT_HINT),
    "UNAVAILABLE": (RegistryError, "the registry is unavailable: re-run when it is back"),
}
_STATUSES: dict[int, tuple[type[RegistryError], str]] = {
    404: (NotFoundError, "check the repository, tag or digest"),
    405: (RegistryError, "the registry does not allow this method here: a read-only registry "
                         "or pull-through mirror refuses writes; a delete needs deletes "
                         "enabled"),
    429: (RegistryRateLimitError, RATE_LIMIT_HINT),
    # RFC 6585 §5; a trial: a credential helper's 1.6 MB secret in the Authorization header was
    # "check the registry's logs"
    431: (RegistryError, "the request's headers are too large for the registry (or a proxy): "
                         "most often the credentials sent, a token or password from the helper "
                         "or PADDLECD_REGISTRY_PASSWORD, is far longer than a registry takes"),
    500: (RegistryError, "the registry failed internally: check its logs (storage backend: free "
                         "space, permissions)"),
    502: (RegistryError, "the registry behind the gateway is down or slow: check it"),
    503: (RegistryError, "the registry is unavailable: re-run when it is back"),
    504: (RegistryError, "the registry behind the gateway is down or slow: check it"),
}


@dataclass(frozen=True)
class Answer:
    """An error answer as read: ``status``, OCI ``codes`` (upper-case, in order), ``detail`` text
    (``CODE: message; …`` for messages), and ``foreign`` (a non-empty body that is not the spec's
    JSON: something else answered) with its ``content_type``."""

    status: int
    codes: tuple[str, ...] = ()
    detail: str = ""
    foreign: bool = False
    content_type: str = ""
    plain_to_tls: bool = False


def read_answer(status: int, body: bytes, content_type: str = "") -> Answer:
    """Read an error answer's body (bytes as received; empty for HEAD)."""
    ctype = content_type.split(";")[0].strip().lower()
    if not body.strip():
        return Answer(status, content_type=ctype)
    if status == 400 and _PLAIN_TO_TLS in body:
        return Answer(status, foreign=True, content_type=ctype, plain_to_tls=True)
    try:
        doc: Any = json.loads(body)
    except ValueError:
        return Answer(status, foreign=True, content_type=ctype or "non-JSON text")
    errors = doc.get("errors") if isinstance(doc, dict) else None
    if not isinstance(errors, list):
        return Answer(status, foreign=True, content_type=ctype or "JSON")
    items = [e for e in errors if isinstance(e, dict)]
    codes = tuple(str(e.get("code", "")).upper() for e in items)
    detail = "; ".join(f"{e.get('code')}: {str(e.get('message', ''))[:160]}" for e in items)
    return Answer(status=status, codes=codes, detail=detail, content_type=ctype)


# An error body that starts as JSON and does not parse: the spec's answer cut short, or garbled.
CUT_JSON = "cut or malformed JSON"

# Go's net/http answers a plain-HTTP request on a TLS port with this 400 (net/http/server.go)
_PLAIN_TO_TLS = b"Client sent an HTTP request to an HTTPS server"
_HTML_BODY = re.compile(r"error parsing HTTP (\d{3}) response body: .*?:\s*\"(.*)\"", re.S)
_STATUS = re.compile(r"(?:unexpected (?:HTTP )?status(?: code)?|HTTP status):? (\d{3})")
_TITLE = re.compile(r"<title>\s*(.*?)\s*</title>", re.I | re.S)


def from_engine_text(text: str) -> Answer | None:
    """The registry's answer inside an engine's error text (a push, pull or build stream), as the
    Docker engine words it (moby distribution/errors.go, docker/distribution registry/client):
    ``<code in words>: <message>`` for an OCI error (``manifest invalid: …``), ``received
    unexpected HTTP status: 500 …`` for a bare status, ``error parsing HTTP 413 response body:
    … "<html>…"`` for a body that is not the spec's JSON. None when the text holds none of them
    (the engine's own failure)."""
    html = _HTML_BODY.search(text)
    if html:
        body = html.group(2).replace('\\"', '"').lstrip()
        if body.startswith(("{", "[")):  # a trial: a cut JSON error was called "a HTML body"
            return Answer(int(html.group(1)), foreign=True, content_type=CUT_JSON)
        title = _TITLE.search(body)
        return Answer(int(html.group(1)), foreign=True,
                      content_type="HTML" + (f" ({title.group(1)[:80]})" if title else "")
                      if body.startswith("<") else "non-JSON text")
    words = text.split(":", 1)[0].strip().upper().replace(" ", "_")
    status = _STATUS.search(text)
    if words in _CODES or words in ("UNAUTHORIZED", "DENIED"):
        return Answer(int(status.group(1)) if status else 0, codes=(words,),
                      detail=f"{words}: {text.split(':', 1)[-1].strip()[:160]}")
    if status:
        return Answer(int(status.group(1)))
    return None


def retryable(answer: Answer) -> bool:
    """True when asking again may succeed: 429, 500, 502–504, or a rate-limit/unavailable code."""
    return answer.status in RETRY_STATUSES or bool(RETRY_CODES & set(answer.codes))


def tls_settings(section: str | None) -> tuple[str, str]:
    """How a TLS hint names the settings of a registry's TLS: ``(CA file, plain HTTP)`` of the
    settings ``section`` (``registry``: the candidates', ``release``: a separate release
    registry, as ``client_for`` picks them); None: a registry no setting covers (the system CAs).
    A trial: the release registry's TLS failure hinted at registry.ca_file."""
    if section is None:
        return ("the system CA store (this registry is neither registry.url nor "
                "release.registry)", "no setting: other registries use TLS")
    return (f"{section}.ca_file (PADDLECD_{section.upper()}_CA_FILE)",
            f"{section}.insecure=true")


def to_error(answer: Answer, *, what: str, host: str,
             login_hint: Callable[[], str], section: str | None = "registry") -> RegistryError:
    """The one typed error for ``answer``.

    Args:
        answer: from :func:`read_answer`.
        what: the action ("resolving host/repo:tag"), first in the message.
        host: the registry's API host, for proxy messages.
        login_hint: makes the hint for 401/403 (it names where the credentials came from; called
            only then, as looking credentials up may run a helper).
        section: whose TLS settings a TLS hint names (:func:`tls_settings`).
    """
    detail = " ".join(filter(None, (f"HTTP {answer.status}" if answer.status else "",
                                    answer.detail)))
    if answer.status == 413:
        return RegistryError(
            f"{what}: HTTP 413 Request Entity Too Large — a proxy in front of {host} caps the "
            "body size",
            "lift the proxy's cap for the registry (nginx: client_max_body_size 0; "
            "ingress-nginx: nginx.ingress.kubernetes.io/proxy-body-size: \"0\")")
    if answer.status == 431:  # whoever answered (a proxy's page, too): the request's headers
        return RegistryError(f"{what}: HTTP 431 Request Header Fields Too Large",
                             _STATUSES[431][1])
    if answer.plain_to_tls:
        return RegistryError(
            f"{what}: {host} speaks HTTPS, and this request was plain HTTP",
            f"set {tls_settings(section)[0]} to its CA and "
            f"{tls_settings(section)[1].replace('=true', '')} to false (a loopback registry "
            "without a CA is spoken to over plain HTTP)" if section else
            "check the registry's address (a loopback one without a CA is spoken to over plain "
            "HTTP)")
    if answer.foreign:
        return _proxy_error(answer, what=what, host=host, login_hint=login_hint)
    if answer.status in (401, 403) or {"UNAUTHORIZED", "DENIED"} & set(answer.codes):
        return RegistryAuthError(f"{what}: {host} denied access ({detail})", login_hint())
    known = [_CODES[c] for c in answer.codes if c in _CODES]
    kind, hint = known[0] if known else _STATUSES.get(answer.status, (RegistryError, _LOGS))
    if kind is NotFoundError:
        return NotFoundError(f"{what}: not found ({detail})", hint)
    return kind(f"{what}: {detail}", hint)


def _proxy_error(answer: Answer, *, what: str, host: str,
                 login_hint: Callable[[], str]) -> RegistryError:
    if answer.content_type == CUT_JSON:  # maybe the registry's, broken off on its way
        return RegistryError(
            f"{what}: HTTP {answer.status} with a {CUT_JSON} body — the answer from {host} was "
            "cut short or garbled on its way", "check the proxy or network between this "
            "machine and the registry, and the registry's logs for this request")
    cause = (f"{what}: HTTP {answer.status} with a {answer.content_type} body — not the "
             f"registry's answer: a proxy or load balancer in front of {host} answered")
    if answer.status in (401, 403, 407):
        return RegistryAuthError(cause, "the proxy wants its own login, or " + login_hint())
    if answer.status in (502, 503, 504):
        return RegistryError(cause, "the registry behind the proxy is down or unreachable from it: "
                                    "check the registry and the proxy's upstream")
    if answer.status == 429:
        return RegistryRateLimitError(cause, RATE_LIMIT_HINT)
    return RegistryError(cause, "check the proxy's configuration and logs for this request")

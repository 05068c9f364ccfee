"""A loopback HTTP relay for benchmarks and tests: counts requests and bytes, delays each request.

``Relay(target_port, delay=0.02)`` listens on 127.0.0.1:<port> and forwards every HTTP/1.1 request
to 127.0.0.1:<target_port> (a distribution registry), keeping connections alive on both sides, so a
client pointed at ``relay.host`` sees the registry "``delay`` seconds away" (one round trip per
request, as a remote registry costs) and ``relay.reset()`` says what crossed the wire: requests,
bytes up (client → registry: request lines, headers, bodies) and down (status lines, headers,
bodies), counted on the client's socket, and per kind of request (``kinds``: ``"GET manifests"``,
``"HEAD blobs"``, ``"GET tags/list"``… → (requests, bytes down + up)), to see where they go. The
``Host`` header is passed through, so the registry writes upload ``Location`` URLs that point back
at the relay.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "upgrade"}
# The resource of a distribution API path: /v2/<name>/<resource>/… (distribution-spec endpoints).
_RESOURCE = re.compile(r"/v2/.+?/(manifests|blobs/uploads|blobs|tags/list|referrers)(/|\?|$)")


def kind(method: str, path: str) -> str:
    """``"<METHOD> <resource>"`` of a request, e.g. ``"GET manifests"`` (``"GET other"`` for
    ``/v2/`` and token requests)."""
    m = _RESOURCE.search(path)
    return f"{method} {m.group(1) if m else 'other'}"


@dataclass(frozen=True)
class Wire:
    """What crossed the relay: ``requests``, bytes ``up`` (to the registry) and ``down``.

    ``server_errors`` counts the registry's own 5xx answers among ``requests``: distribution
    answers 500 now and then to a HEAD of a tag while another request writes the same manifest
    under another tag of the repository (tests/integration/test_ledger.py: 4 runs in 32 of
    a promotion's parallel moving-tag writes), and a client retries it; ``client_requests`` is
    what the client asked for, without those retried answers."""

    requests: int
    up: int
    down: int
    kinds: dict[str, tuple[int, int]] = field(default_factory=dict)
    server_errors: int = 0  # of ``requests``: answered 5xx by the registry (clients retry those)

    @property
    def client_requests(self) -> int:
        """``requests`` less the registry's 5xx answers (each retried by the client)."""
        return self.requests - self.server_errors

    def by_kind(self) -> str:
        """``kinds`` as one line, most requests first: ``GET manifests 12 (9.1 KiB), …``."""
        rows = sorted(self.kinds.items(), key=lambda kv: (-kv[1][0], kv[0]))
        return ", ".join(f"{k} {n} ({b / 1024:.1f} KiB)" for k, (n, b) in rows)


class _Counted:
    """A socket file that adds the bytes read or written to ``relay.<way>``."""

    def __init__(self, raw: Any, relay: Relay, way: str):
        self.raw, self.relay, self.way = raw, relay, way

    def _count(self, data: bytes) -> bytes:
        self.relay.add(self.way, len(data))
        return data

    def read(self, *args: Any) -> bytes:
        return self._count(self.raw.read(*args))

    def readline(self, *args: Any) -> bytes:
        return self._count(self.raw.readline(*args))

    def write(self, data: bytes) -> int:
        self.relay.add(self.way, len(data))
        return self.raw.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # the headers and the body go out as two writes: with Nagle on, the body waits for the
        # client's delayed ACK of the headers (~40 ms a response on Linux)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rfile = _Counted(self.rfile, self.server.relay, "up")  # type: ignore[assignment]
        self.wfile = _Counted(self.wfile, self.server.relay, "down")  # type: ignore[assignment]
        self.upstream: http.client.HTTPConnection | None = None

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def _forward(self) -> None:
        relay = self.server.relay
        relay.begin()
        try:
            self._relay()
        except (BrokenPipeError, ConnectionResetError):  # the client went away (or was killed)
            self.close_connection = True
        finally:
            relay.end()

    def _relay(self) -> None:
        relay = self.server.relay
        relay.add("requests", 1)
        body = self._body()
        time.sleep(relay.delay)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        resp = self._send_upstream(headers, body)
        data = resp.read()
        if resp.status >= 500:
            relay.add("server_errors", 1)
        extra: dict[str, str] = {}
        if relay.pages and self.command == "GET" and resp.status == 200 and (
            urlsplit(self.path).path.endswith("/tags/list")
        ):
            data, extra = _page(self.path, data, relay.pages)
        self.send_response_only(resp.status, resp.reason)
        for key, value in [*resp.getheaders(), *extra.items()]:
            if key.lower() not in _HOP and not (
                key.lower() == "content-length" and self.command != "HEAD"
            ):
                self.send_header(key, value)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()
        relay.add_kind(kind(self.command, self.path))

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send_upstream(self, headers: dict[str, str], body: bytes) -> http.client.HTTPResponse:
        for attempt in range(2):  # the registry may have closed an idle kept-alive connection
            if self.upstream is None:
                self.upstream = http.client.HTTPConnection(
                    "127.0.0.1", self.server.relay.target_port, timeout=120
                )
            try:
                self.upstream.request(self.command, self.path, body=body or None, headers=headers)
                return self.upstream.getresponse()
            except (ConnectionError, http.client.HTTPException):
                self.upstream.close()
                self.upstream = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _forward


def _page(path: str, data: bytes, default: int) -> tuple[bytes, dict[str, str]]:
    """A whole tag list (distribution 2.8's answer) cut to one page as the OCI distribution-spec
    says ("Listing Tags"): tags in lexical order after ``last``, at most ``n`` and never more
    than ``default`` (a registry may return fewer than asked; distribution 3 caps ``n`` too), and
    a ``Link: <…>; rel="next"`` header when more follow."""
    url = urlsplit(path)
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    n, last = min(int(query.get("n") or default), default), query.get("last", "")
    doc = json.loads(data)
    after = [t for t in sorted(doc.get("tags") or []) if t > last]
    doc["tags"], extra = after[:n], {}
    if len(after) > n:
        extra["Link"] = f'<{url.path}?{urlencode({"n": n, "last": after[n - 1]})}>; rel="next"'
    return json.dumps(doc).encode(), extra


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    relay: Relay


class Relay:
    """The relay; a context manager (stops serving on exit).

    Args:
        target_port: the registry's port on 127.0.0.1.
        delay: seconds added before forwarding each request (0.02 shows a registry 20 ms away).
        pages: when > 0, answer tag lists a page at a time (``n``/``last``/``Link``, at most this
            many tags a page), as a registry that pages does (distribution 3) and
            distribution 2.8 does not: the tests' stand-in for one.

    Attributes:
        host: ``127.0.0.1:<port>`` to use as the registry's address.
    """

    def __init__(self, target_port: int, delay: float = 0.0, *, pages: int = 0):
        self.target_port, self.delay, self.pages = target_port, delay, pages
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._inflight = 0  # requests received whose handler has not counted their kind yet
        self._counts = {"requests": 0, "up": 0, "down": 0, "server_errors": 0}
        self._kinds: dict[str, tuple[int, int]] = {}
        self._local = threading.local()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.relay = self
        self.host = f"127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def begin(self) -> None:
        """A request arrived (its handler counts it, then its kind when the answer is sent)."""
        with self._lock:
            self._inflight += 1

    def end(self) -> None:
        """A request's handler is done with it."""
        with self._lock:
            self._inflight -= 1
            self._idle.notify_all()

    def add(self, what: str, n: int) -> None:
        """Count ``n`` more of ``what`` (``requests``, ``up``, ``down``, ``server_errors``)."""
        with self._lock:
            self._counts[what] += n
        if what in ("up", "down"):  # this handler thread's own bytes, for the per-kind count
            self._local.bytes = getattr(self._local, "bytes", 0) + n

    def add_kind(self, name: str) -> None:
        """Count one request of kind ``name`` with the bytes its handler thread (one per
        connection) moved since its previous request ended: request line, headers, bodies."""
        moved = getattr(self._local, "bytes", 0)
        with self._lock:
            n, b = self._kinds.get(name, (0, 0))
            self._kinds[name] = (n + 1, b + moved)
        self._local.bytes = 0

    def reset(self) -> Wire:
        """What crossed since the last reset; the counters restart from zero.

        Waits (≤ 5 s) for the handlers of requests already answered: the client has its answer
        before the handler counts the request's kind, so a reset right after the client's last
        answer lost that kind (a run: 66 requests, 65 by kind)."""
        with self._lock:
            self._idle.wait_for(lambda: self._inflight == 0, timeout=5)
            out = Wire(**self._counts, kinds=dict(self._kinds))
            self._counts = dict.fromkeys(self._counts, 0)
            self._kinds = {}
        return out

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

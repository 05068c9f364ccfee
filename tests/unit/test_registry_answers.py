"""Registry answers read by status and OCI error code, and rate limits waited out.

A scripted loopback HTTP server plays the registry (or the proxy in front of it): each test queues
the answers it wants, in order, and reads back what the client sent. Error wording in the scripted
bodies is deliberately misleading: the client must decide from the status and the code alone.
"""

from __future__ import annotations

import email.utils
import http.server
import json
import threading
import time

import pytest

from paddlecd.errors import NotFoundError, RegistryAuthError, RegistryError, RegistryRateLimitError
from paddlecd.registry.auth import Credentials
from paddlecd.registry.client import RegistryClient
from paddlecd.registry.transport import retry_after

TAGS = json.dumps({"name": "ci/p", "tags": ["a"]}).encode()


class Scripted(http.server.BaseHTTPRequestHandler):
    """Answers from ``script`` (status, headers, body) in order, then 200 with a tag list."""

    script: list[tuple[int, dict[str, str], bytes]] = []
    seen: list[tuple[str, str, float]] = []

    def log_message(self, *args):
        pass

    def _answer(self):
        Scripted.seen.append((self.command, self.path, time.monotonic()))
        status, headers, body = Scripted.script.pop(0) if Scripted.script else (200, {}, TAGS)
        headers = dict(headers)
        cut = int(headers.pop("X-Cut-At", len(body)))  # the body breaks off after `cut` bytes
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body[:cut])
        if cut < len(body):
            self.close_connection = True

    do_GET = do_HEAD = do_PUT = do_POST = _answer


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    Scripted.script, Scripted.seen = [], []
    yield f"127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def oci(status: int, code: str, message: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    body = json.dumps({"errors": [{"code": code, "message": message, "detail": None}]}).encode()
    return status, {"Content-Type": "application/json", **headers}, body


def client(host: str, **kwargs) -> RegistryClient:
    return RegistryClient(host, insecure=True, credentials=Credentials("bot", "pw"), **kwargs)


# ------------------------------------------------------------------ status and code, not wording

def test_html_error_page_is_named_as_a_proxy_answer(server):
    page = b"<html><h1>502 Bad Gateway</h1></html>"
    Scripted.script = [(502, {"Content-Type": "text/html"}, page)] * 2
    with pytest.raises(RegistryError) as info:
        client(server, retries=2).list_tags("ci/p")
    cause = info.value.cause
    assert "HTTP 502" in cause and "text/html" in cause and "proxy or load balancer" in cause
    assert "behind the proxy" in info.value.hint


def test_a_200_whose_body_is_not_json_is_a_registry_error_naming_the_request(server):
    """A third trial: a tag list cut short (``{"tags": [1, 2``) ended as "error: Expecting ','
    delimiter: line 1 column 15 (char 14)", exit 2, naming neither the registry nor the request."""
    Scripted.script = [(200, {"Content-Type": "application/json"}, b'{"tags": [1, 2')]
    with pytest.raises(RegistryError) as info:
        client(server).list_tags("ci/p")
    assert info.value.cause == (f"listing tags of {server}/ci/p: HTTP 200 from {server} is not "
                                "valid JSON (application/json, 14 bytes; it ends mid-document "
                                "at line 1 (cut short?))")  # trial 21: json's own words before
    assert info.value.exit_code == 5 and server in info.value.hint
    assert client(server).list_tags("ci/p") == ["a"]  # a JSON answer reads as before


def test_plain_text_401_from_a_proxy_is_an_auth_error_naming_the_proxy(server):
    Scripted.script = [(403, {"Content-Type": "text/plain"}, b"Forbidden by policy")]
    with pytest.raises(RegistryAuthError, match="proxy or load balancer") as info:
        client(server).list_tags("ci/p")
    assert "proxy wants its own login" in info.value.hint


def test_plain_http_to_a_tls_port_says_so(server):
    """A re-trial: a TLS registry on loopback without registry.ca_file was "HTTP 400 ... a proxy
    or load balancer answered"; the body is Go net/http's own answer to plain HTTP."""
    body = b"Client sent an HTTP request to an HTTPS server.\n"
    Scripted.script = [(400, {"Content-Type": "text/plain; charset=utf-8"}, body)]
    with pytest.raises(RegistryError, match="speaks HTTPS, and this request was plain HTTP") as e:
        client(server).list_tags("ci/p")
    assert "registry.ca_file" in e.value.hint


def test_a_ca_file_without_a_certificate_is_named(tmp_path, server):
    """A re-trial: a garbage registry.ca_file reached ssl ("HTTPSConnectionPool(...) Max retries
    exceeded", cut off) instead of naming the file."""
    from paddlecd.errors import ConfigError

    bad = tmp_path / "ca.crt"
    bad.write_bytes(b"\x00garbage")
    with pytest.raises(ConfigError, match=f"registry CA file {bad} holds no PEM certificate"):
        RegistryClient(server, ca_file=str(bad), retries=1).list_tags("ci/p")
    with pytest.raises(ConfigError, match="No such file"):
        RegistryClient(server, ca_file=str(tmp_path / "absent.crt"), retries=1).list_tags("ci/p")


def test_413_names_the_proxy_body_size_cap_and_how_to_lift_it(server):
    Scripted.script = [(202, {"Location": "/v2/ci/p/blobs/uploads/u1"}, b""),
                       (413, {"Content-Type": "text/html"}, b"<html>413 Too Large</html>")]
    with pytest.raises(RegistryError, match="HTTP 413") as info:
        client(server).upload_blob("ci/p", "sha256:" + "0" * 64, b"x" * 10, 10)
    assert "client_max_body_size 0" in info.value.hint and "re-run" not in info.value.hint


@pytest.mark.parametrize("status, code, kind, hint", [
    (404, "NAME_UNKNOWN", NotFoundError, "repository"),
    (404, "MANIFEST_UNKNOWN", NotFoundError, "tag or digest"),
    (404, "BLOB_UNKNOWN", NotFoundError, "blob"),
    (400, "MANIFEST_BLOB_UNKNOWN", RegistryError, "copy or push the blobs"),
    (400, "NAME_INVALID", RegistryError, "lower-case"),
    (400, "TAG_INVALID", RegistryError, "[A-Za-z0-9_]"),
    (400, "SIZE_INVALID", RegistryError, "proxy"),
    (405, "UNSUPPORTED", RegistryError, "does not support"),
    (403, "DENIED", RegistryAuthError, "may pull/push"),
    (401, "UNAUTHORIZED", RegistryAuthError, "credentials"),
])
def test_error_code_decides_type_and_hint(server, status, code, kind, hint):
    # the message says something else entirely: only the code may count
    Scripted.script = [oci(status, code, "unauthorized: out of disk space, blob unknown")]
    with pytest.raises(kind) as info:
        client(server).get_manifest("ci/p", "a")
    assert type(info.value) is kind
    assert hint in info.value.hint and f"HTTP {status} {code}" in info.value.cause
    assert len(Scripted.seen) == 1  # a client error is never retried


def test_431_names_the_credentials_sent_as_the_likely_cause(server):
    """Trial 16: a helper's 1.6 MB secret drew HTTP 431, hinted "check the registry's logs"."""
    Scripted.script = [(431, {"Content-Type": "text/plain"}, b"Request Header Fields Too Large")]
    with pytest.raises(RegistryError, match="HTTP 431") as info:
        client(server).list_tags("ci/p")
    assert "headers are too large" in info.value.hint and "credentials" in info.value.hint
    assert len(Scripted.seen) == 1


def test_internal_error_and_501_are_told_apart(server):
    Scripted.script = [oci(500, "UNKNOWN", "x")] * 2
    with pytest.raises(RegistryError, match="HTTP 500") as info:
        client(server, retries=2).list_tags("ci/p")
    assert "storage backend" in info.value.hint and len(Scripted.seen) == 2
    Scripted.script, Scripted.seen = [(501, {}, b"")], []
    with pytest.raises(RegistryError, match="HTTP 501"):
        client(server, retries=3).list_tags("ci/p")
    assert len(Scripted.seen) == 1  # not retried: it will not be implemented on the next try


# ------------------------------------------------------------------ rate limits

def test_retry_after_seconds_and_http_date():
    now = time.time()
    assert retry_after("7") == 7.0
    later = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after(later, now=now) == pytest.approx(30, abs=1)
    assert retry_after(email.utils.formatdate(now - 30, usegmt=True), now=now) == 0.0
    assert retry_after("") is None and retry_after("soon") is None


def test_429_with_retry_after_is_waited_out_with_one_progress_line(server):
    Scripted.script = [oci(429, "TOOMANYREQUESTS", "slow down", **{"Retry-After": "1"})]
    lines: list[str] = []
    assert client(server, on_progress=lines.append).list_tags("ci/p") == ["a"]
    (first, _, t0), (_, _, t1) = Scripted.seen
    assert t1 - t0 >= 0.95
    assert len(lines) == 1 and "HTTP 429" in lines[0] and "waiting 1 s" in lines[0]


def test_503_with_an_http_date_is_waited_out(server):
    when = email.utils.formatdate(time.time() + 2, usegmt=True)
    Scripted.script = [(503, {"Retry-After": when}, b"")]
    lines: list[str] = []
    assert client(server, on_progress=lines.append, retries=1).list_tags("ci/p") == ["a"]
    assert len(Scripted.seen) == 2 and len(lines) == 1  # waited despite retries=1: server asked


def test_server_directed_waits_are_bounded_in_total(server):
    Scripted.script = [oci(429, "TOOMANYREQUESTS", "x", **{"Retry-After": "1"})] * 10
    started = time.monotonic()
    with pytest.raises(RegistryRateLimitError, match="rate_limit_wait=2"):
        client(server, rate_limit_wait=2).list_tags("ci/p")
    assert time.monotonic() - started < 5 and len(Scripted.seen) == 3  # waited 1 s twice, gave up


def test_a_wait_past_the_bound_fails_at_once_naming_the_limit(server):
    Scripted.script = [oci(429, "TOOMANYREQUESTS", "x", **{"Retry-After": "3600",
                                                          "RateLimit-Limit": "100;w=21600"})]
    started = time.monotonic()
    with pytest.raises(RegistryRateLimitError) as info:
        client(server).list_tags("ci/p")
    assert time.monotonic() - started < 2 and len(Scripted.seen) == 1
    assert "RateLimit-Limit 100;w=21600" in info.value.cause and "3600 s" in info.value.cause
    assert "PADDLECD_REGISTRY_RATE_LIMIT_WAIT" in info.value.hint


def test_429_without_retry_after_backs_off_then_names_the_limit(server):
    Scripted.script = [(429, {}, b"")] * 5
    with pytest.raises(RegistryRateLimitError, match="rate limit: HTTP 429 after 2 attempts"):
        client(server, retries=2).list_tags("ci/p")
    assert len(Scripted.seen) == 2


def test_a_stream_body_is_not_resent_even_when_asked_to_wait(server):
    Scripted.script = [(202, {"Location": "/v2/ci/p/blobs/uploads/u1"}, b""),
                       oci(429, "TOOMANYREQUESTS", "x", **{"Retry-After": "1"})]
    import io

    with pytest.raises(RegistryRateLimitError):
        client(server).upload_blob("ci/p", "sha256:" + "0" * 64, io.BytesIO(b"abc"), 3)
    assert [m for m, _, _ in Scripted.seen] == ["POST", "PUT"]


def test_a_tls_hint_names_the_settings_of_the_registry_that_failed():
    """Trial 4: a TLS failure with the release registry hinted at registry.ca_file and
    registry.insecure, which do not apply to it (client_for picks release.*)."""
    from paddlecd.registry import answers

    plain = answers.Answer(400, foreign=True, plain_to_tls=True)
    for section in ("registry", "release"):
        hint = answers.to_error(plain, what="w", host="h", login_hint=str,
                                section=section).hint
        assert f"{section}.ca_file (PADDLECD_{section.upper()}_CA_FILE)" in hint
        assert f"{section}.insecure to false" in hint
    assert answers.tls_settings("release") == ("release.ca_file (PADDLECD_RELEASE_CA_FILE)",
                                               "release.insecure=true")


def test_client_for_tells_the_transport_whose_settings_apply(tmp_path):
    from paddlecd import config
    from paddlecd.registry.client import client_for

    s = config.load({"state_dir": str(tmp_path), "release.registry": "127.0.0.1:5882"},
                    root=tmp_path, environ={})
    assert client_for(s).settings_section == "registry"
    assert client_for(s, "127.0.0.1:5882").settings_section == "release"
    assert client_for(s, "other.example:5000").settings_section is None


def test_an_answer_that_breaks_off_is_retried_then_named_with_the_registry(server):
    """Trial 7: a 200 whose body ended early (a proxy) gave requests' ChunkedEncodingError, an
    OSError, which the catch site called a bad path (exit 2, "check the path"), and promote
    "ChunkedEncodingError: …" (exit 7). Now it is retried, then a RegistryError naming the
    registry and the broken answer."""
    Scripted.script = [(200, {"Content-Type": "application/json", "X-Cut-At": "10"}, TAGS)] * 2
    assert client(server, retries=3).list_tags("ci/p") == ["a"]  # cut twice, then whole
    Scripted.script = [(200, {"Content-Type": "application/json", "X-Cut-At": "10"}, TAGS)] * 2
    with pytest.raises(RegistryError) as e:
        client(server, retries=2).list_tags("ci/p")
    assert f"the answer from {server} broke off" in e.value.cause
    assert "proxy" in e.value.hint and not isinstance(e.value, OSError)


@pytest.mark.parametrize("api", [404, 200, 401])
def test_a_missing_digest_on_a_server_that_is_no_registry_is_named_so(server, api):
    """A trial: promote against a web server (every path 404, a HEAD without a body) said
    "digest … is not in …". GET /v2/ tells a registry (200, or 401 for a login) from another
    server (404: "does not implement this specification", OCI distribution spec end-1)."""
    from paddlecd.errors import PromotionError
    from paddlecd.registry.reference import parse_reference as parse
    from paddlecd.release.plan import _check_source

    Scripted.script = [(404, {}, b""), (404, {}, b""), (api, {}, b"{}")]  # HEAD, GET, GET /v2/
    ref = parse(f"{server}/ci/p@sha256:{'a' * 64}")
    client = RegistryClient(server, insecure=True)
    if api == 404:
        with pytest.raises(RegistryError, match=f"{server} is no registry: GET /v2/ answered 404"):
            _check_source(client, ref)
    else:
        with pytest.raises(PromotionError, match="digest sha256:a+ is not in"):
            _check_source(client, ref)
    assert Scripted.seen[-1][:2] == ("GET", "/v2/")


@pytest.mark.parametrize("how", ["reset", "close"])
def test_a_server_that_takes_the_connection_and_hangs_up_is_not_called_unreachable(how):
    """A trial: a connection reset on every request read "registry … unreachable … — is it
    running?" (it was: it took the connection). A refused port still reads "unreachable"."""
    import socket
    import struct

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def hang_up():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(65536)
            if how == "reset":  # SO_LINGER 0: close() sends RST
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    threading.Thread(target=hang_up, daemon=True).start()
    try:
        with pytest.raises(RegistryError, match="accepted the connection, then broke it off") as e:
            RegistryClient(f"127.0.0.1:{port}", insecure=True, retries=1).list_tags("ci/p")
        assert "is it running" not in str(e.value) and "proxy in between" in e.value.hint
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections to it are refused
    try:
        with pytest.raises(RegistryError, match="unreachable.*is it running"):
            RegistryClient(f"127.0.0.1:{closed.getsockname()[1]}", insecure=True,
                           retries=1).list_tags("ci/p")
    finally:
        closed.close()


def test_a_redirect_to_a_host_that_does_not_answer_names_that_host(server):
    """Trial 11: a 307 to the registry's storage on a port nothing listens on read "registry
    <the registry> unreachable … — is it running?" (it had answered)."""
    import socket

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections to it are refused
    target = f"127.0.0.1:{closed.getsockname()[1]}"
    try:
        Scripted.script = [(307, {"Location": f"http://{target}/blob"}, b"")]
        with pytest.raises(RegistryError) as e:
            RegistryClient(server, insecure=True, retries=1).list_tags("ci/p")
    finally:
        closed.close()
    assert f"{server} redirected the request to {target}, which failed" in e.value.cause
    assert "is it running" not in e.value.cause and target in e.value.hint


def test_a_digest_reference_is_never_resolved_to_the_digest_a_header_names(server):
    """Trial 11: a HEAD by digest D answered with ``Docker-Content-Digest: <another>`` made
    ``verify --image repo@D`` verify and sign that other image. The header must name D; else the
    manifest is read and its bytes checked against D."""
    import hashlib

    body = json.dumps({"schemaVersion": 2, "config": {}, "layers": [],
                       "mediaType": "application/vnd.oci.image.manifest.v1+json"}).encode()
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    decoy = "sha256:" + "d" * 64
    oci = {"Content-Type": "application/vnd.oci.image.manifest.v1+json"}
    Scripted.script = [(200, {**oci, "Docker-Content-Digest": decoy}, b""), (200, oci, body)]
    got = RegistryClient(server, insecure=True).resolve("ci/p", digest)
    assert got.digest == digest and [m for m, _, _ in Scripted.seen] == ["HEAD", "GET"]
    Scripted.script = [(200, {**oci, "Docker-Content-Digest": decoy}, b""),
                       (200, oci, body.replace(b"[]", b"[ ]"))]  # bytes of another manifest
    with pytest.raises(RegistryError, match="does not match"):
        RegistryClient(server, insecure=True).resolve("ci/p", digest)


@pytest.mark.parametrize("manifests", ['"abc"', '[1]', '[{"digest": "sha256:x", "size": 1}]',
                                       '[{"digest": "sha256:' + 'a' * 64 + '", "size": "1"}]',
                                       '[{"digest": "sha256:' + 'a' * 64 + '", "annotations": 1}]'])
def test_an_index_whose_manifests_are_no_descriptors_is_named_not_a_traceback(manifests):
    """Trial 12: a referrers answer whose ``manifests`` was a string ended in a TypeError
    traceback in prune, compare and evidence.show."""
    from paddlecd.registry.client import Descriptor, Manifest
    from paddlecd.registry.referrers import index_entries

    doc = json.loads(f'{{"schemaVersion": 2, "manifests": {manifests}}}')
    with pytest.raises(RegistryError, match="no OCI descriptors"):
        index_entries(doc, "listing referrers of r/p@sha256:…", "r")
    raw = json.dumps({**doc, "mediaType": "application/vnd.oci.image.index.v1+json"}).encode()
    index = Manifest(Descriptor("sha256:" + "b" * 64, "application/vnd.oci.image.index.v1+json",
                                len(raw)), raw)
    with pytest.raises(RegistryError, match="no OCI descriptors"):
        index.children()
    assert index_entries({"manifests": None}, "x", "r") == []


def test_a_config_blob_is_checked_against_its_digest_before_it_is_parsed(server):
    """Trial 12: a config blob with its quotes stripped (release.prune --dry-run) was a
    JSONDecodeError traceback: it was parsed before its digest was checked."""
    import hashlib

    config = b'{"created": "2026-12-03T00:00:00Z"}'
    cdigest = "sha256:" + hashlib.sha256(config).hexdigest()
    manifest = json.dumps({"schemaVersion": 2, "layers": [],
                           "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"digest": cdigest, "size": len(config)}}).encode()
    mdigest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    oci = {"Content-Type": "application/vnd.oci.image.manifest.v1+json"}
    Scripted.script = [(200, oci, manifest), (200, {}, config.replace(b'"', b""))]
    with pytest.raises(RegistryError, match=f"blob {cdigest} arrived as sha256:"):
        RegistryClient(server, insecure=True).image_config("ci/p", mdigest)
    Scripted.script = [(200, oci, manifest), (200, {}, config)]
    assert RegistryClient(server, insecure=True).image_config("ci/p", mdigest)["created"]


def test_a_registry_that_answers_too_slowly_is_not_called_unreachable():
    """Trial 16: a registry whose manifest answers took 100 s was "unreachable: Read timed out —
    is it running?", hint "start it". A socket that accepts and never answers stands in."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # connections are accepted by the kernel; nothing ever answers
    host = f"127.0.0.1:{listener.getsockname()[1]}"
    try:
        with pytest.raises(RegistryError) as info:
            client(host, retries=1, timeout=0.5).list_tags("ci/p")
    finally:
        listener.close()
    cause = info.value.cause
    assert "accepted the connection but did not answer within 0.5 s (1 attempt(s))" in cause
    assert "is it running" not in cause and "overloaded or stuck" in info.value.hint

"""Bearer token auth and retries of paddlecd.registry.transport, against a small in-process HTTP
stub.

The integration tests use the real distribution registry with htpasswd (Basic) auth; distribution's
token auth needs a separate token server with signing keys, which the test machines do not have, so
the Bearer exchange (challenge → token request with service/scope/basic credentials → retry with the
token) and the 429/503 retry path are checked here against a stub that records what it received.
"""

from __future__ import annotations

import base64
import http.server
import json
import threading
import time
from urllib.parse import parse_qs, urlparse

import pytest

from paddlecd.errors import RegistryAuthError, RegistryError
from paddlecd.registry.auth import Credentials
from paddlecd.registry.client import RegistryClient


class Stub(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str, str]] = []
    failures: list[int] = []
    challenge: str | None = None  # another WWW-Authenticate than the good one
    token_answer: tuple[int, bytes, str] | None = None  # another answer of /token

    def log_message(self, *args):  # keep test output clean
        pass

    def _send(self, status, body=b"{}", headers=None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urlparse(self.path)
        auth = self.headers.get("Authorization", "")
        Stub.seen.append((url.path, url.query, auth))
        if url.path == "/token" and Stub.token_answer:
            status, body, ctype = Stub.token_answer
            return self._send(status, body, {"Content-Type": ctype})
        if url.path == "/token":
            ok = auth == "Basic " + base64.b64encode(b"bot:pw").decode()
            q = parse_qs(url.query)
            good = ok and q.get("service") == ["stub"] and q.get("scope") == [
                "repository:ci/p:pull"]
            return (
                self._send(200, json.dumps({"token": "T0K"}).encode()) if good else self._send(401)
            )
        if Stub.failures:
            return self._send(Stub.failures.pop(0))  # no Retry-After: the client's own backoff
        if auth != "Bearer T0K":
            realm = f"http://{self.headers['Host']}/token"
            good = f'Bearer realm="{realm}",service="stub",scope="x"'
            return self._send(401, headers={"WWW-Authenticate": Stub.challenge or good})
        return self._send(200, json.dumps({"name": "ci/p", "tags": ["a"]}).encode())


def _post(self):  # the OAuth2 refresh-token exchange of an identity token (docker login)
    Stub.seen.append((self.path, "", "POST"))
    status, body, ctype = Stub.token_answer or (200, json.dumps({"token": "T0K"}).encode(),
                                                "application/json")
    self._send(status, body, {"Content-Type": ctype})


Stub.do_POST = _post


@pytest.fixture
def stub():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Stub.seen, Stub.failures, Stub.challenge, Stub.token_answer = [], [], None, None
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_bearer_token_flow(stub):
    c = RegistryClient(stub, insecure=True, credentials=Credentials("bot", "pw"))
    assert c.list_tags("ci/p") == ["a"]
    assert [p for p, _, _ in Stub.seen] == ["/v2/ci/p/tags/list", "/token", "/v2/ci/p/tags/list"]
    assert c.list_tags("ci/p") == ["a"]  # token cached per scope: one more request, no token fetch
    assert len(Stub.seen) == 4


def test_token_refused_is_auth_error_without_secret(stub):
    c = RegistryClient(stub, insecure=True, credentials=Credentials("bot", "WRONG-pw"))
    with pytest.raises(RegistryAuthError, match="token service refused") as info:
        c.list_tags("ci/p")
    assert "WRONG-pw" not in str(info.value) + info.value.hint and "docker login" in info.value.hint


def test_retries_429_and_503_then_succeeds(stub):
    Stub.failures = [429, 503]
    c = RegistryClient(stub, insecure=True, credentials=Credentials("bot", "pw"))
    assert c.list_tags("ci/p") == ["a"]


def test_gives_up_after_retries_with_status(stub):
    Stub.failures = [503] * 10
    c = RegistryClient(stub, insecure=True, credentials=Credentials("bot", "pw"), retries=2)
    with pytest.raises(RegistryError, match="HTTP 503"):
        c.list_tags("ci/p")
    assert len(Stub.failures) == 8


@pytest.mark.parametrize("challenge", [
    "Bearer realm=,service", 'Bearer realm="ftp://127.0.0.1:1/token",service="reg"',
    'Bearer service="reg",scope="x"'])
def test_a_bearer_challenge_without_an_http_realm_is_named_as_the_registry_s(stub, challenge):
    """Trial 4: realm= was "token service  unreachable: Invalid URL ''", an ftp realm "No
    connection adapters", no realm "no credentials: run docker login" — none is the network or
    the login; the registry's challenge is malformed."""
    Stub.challenge = challenge
    c = RegistryClient(stub, insecure=True, credentials=Credentials("bot", "pw"))
    with pytest.raises(RegistryError) as e:
        c.list_tags("ci/p")
    assert e.value.cause.startswith(f"{stub} asked for a Bearer token, but its WWW-Authenticate "
                                    "names no http(s) realm")
    assert challenge in e.value.cause and "token auth configuration" in e.value.hint
    assert e.value.exit_code == 5 and [p for p, _, _ in Stub.seen] == ["/v2/ci/p/tags/list"]


def test_a_token_service_answering_a_page_is_named_with_exit_5(stub):
    """Trial 4: a 200 with an SSO page was "Expecting value: line 1 column 1 (char 0)", hint
    "check the path" (exit 2), or promote's "JSONDecodeError" (exit 7)."""
    Stub.token_answer = (200, b"<html><body>Sign in to continue</body></html>", "text/html")
    c = RegistryClient(stub, insecure=True, credentials=Credentials("bot", "pw"))
    with pytest.raises(RegistryError) as e:
        c.list_tags("ci/p")
    assert e.value.cause.startswith(f"token service http://{stub}/token: HTTP 200 from {stub} "
                                    "is not valid JSON (text/html")
    assert e.value.exit_code == 5


class BlobStub(http.server.BaseHTTPRequestHandler):
    """Serves one blob; the first ``cut`` answers announce its length and stop half-way."""

    blob = b"0123456789" * 100
    cut = 0
    served = 0

    def log_message(self, *args):
        pass

    def do_GET(self):
        BlobStub.served += 1
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.blob)))
        self.end_headers()
        if BlobStub.cut:
            BlobStub.cut -= 1
            self.wfile.write(self.blob[: len(self.blob) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(self.blob)


@pytest.mark.parametrize("cut, attempts, ok", [(1, 3, True), (5, 2, False)])
def test_a_blob_answer_cut_short_is_retried_then_named(cut, attempts, ok):
    """Trial 4: a blob body cut half-way was "its bytes do not match the digest: the registry is
    corrupt or lying"; a stalled one a urllib3 ReadTimeoutError traceback. A short read is
    retried as the transport retries requests, then named with the bytes it got."""
    import hashlib

    from paddlecd.registry import referrers

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), BlobStub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    BlobStub.cut, BlobStub.served = cut, 0
    digest = "sha256:" + hashlib.sha256(BlobStub.blob).hexdigest()
    try:
        c = RegistryClient(f"127.0.0.1:{server.server_address[1]}", insecure=True,
                           retries=attempts)
        if ok:
            assert referrers.read_blob(c, "ci/p", digest) == BlobStub.blob
        else:
            with pytest.raises(RegistryError) as e:
                referrers.read_blob(c, "ci/p", digest)
            assert "the answer stopped after 500 of 1000 bytes (connection closed)" in e.value.cause
            assert "cut it short (2 attempts)" in e.value.hint and "lying" not in e.value.hint
        assert BlobStub.served == (2 if ok else attempts)
    finally:
        server.shutdown()


class StallStub(BlobStub):
    def do_GET(self):
        BlobStub.served += 1
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.blob)))
        self.end_headers()
        self.wfile.write(self.blob[:300])
        self.wfile.flush()
        time.sleep(2)


def test_a_blob_answer_that_stalls_is_named_not_a_traceback():
    from paddlecd.registry import referrers

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StallStub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    BlobStub.served = 0
    try:
        c = RegistryClient(f"127.0.0.1:{server.server_address[1]}", insecure=True, retries=1,
                           timeout=0.3)
        with pytest.raises(RegistryError) as e:
            referrers.read_blob(c, "ci/p", "sha256:" + "a" * 64)
        assert "the answer stopped after 300 of 1000 bytes (timed out)" in e.value.cause
    finally:
        server.shutdown()


def test_tls_with_the_release_registry_hints_at_the_release_settings():
    """Trial 4: the release registry's TLS failure hinted at registry.ca_file."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), BlobStub)  # plain HTTP
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        c = RegistryClient(f"127.0.0.1:{server.server_address[1]}", retries=1,
                           settings_section="release")
        with pytest.raises(RegistryError, match="TLS with") as e:
            c.list_tags("ci/p")
        assert e.value.hint == ("set release.ca_file (PADDLECD_RELEASE_CA_FILE) to the "
                                "registry's CA; a plain-HTTP registry needs release.insecure=true")
    finally:
        server.shutdown()


class ManifestStub(BlobStub):
    body = b"{not json"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)


@pytest.mark.parametrize("body, words, reference", [
    (b"{not json", "is not valid JSON", "ledger"),
    (b"[1, 2]", "is not a manifest (JSON list", "ledger"),
    # trial 19: a sign-in page asked for by digest was "content digest … does not match"
    (b"<!DOCTYPE html><title>Sign in</title>", "is not valid JSON", "sha256:" + "1" * 64),
])
def test_a_manifest_answer_that_is_no_json_object_is_named_exit_5(body, words, reference):
    """Trial 5: a 200 with a manifest media type and "{not json" was a JSONDecodeError traceback
    in release.list (the same garbage on tags/list was named)."""
    ManifestStub.body = body
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ManifestStub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        c = RegistryClient(f"127.0.0.1:{server.server_address[1]}", insecure=True, retries=1)
        with pytest.raises(RegistryError) as e:
            c.get_manifest("ci/p", reference)
        assert words in e.value.cause and e.value.exit_code == 5
    finally:
        server.shutdown()


@pytest.mark.parametrize("token", ["SECRETTOKEN\r\nX-Evil: 1", "SECRETTOKEN\n", "SECRET TOKEN"])
@pytest.mark.parametrize("creds", [Credentials("bot", "pw"), Credentials("<token>", "refresh")])
def test_a_token_that_is_no_bearer_token_is_refused_unsent_and_unprinted(stub, token, creds):
    """Trial 12: a token with CR LF (a header injection) or a final newline ended in a traceback
    or an error that printed it ("Invalid header value b'Bearer SECRETTOKEN\\n'")."""
    Stub.token_answer = (200, json.dumps({"token": token}).encode(), "application/json")
    with pytest.raises(RegistryError, match="answered a token that is no bearer token") as e:
        RegistryClient(stub, insecure=True, credentials=creds).list_tags("ci/p")
    assert "SECRET" not in str(e.value) + e.value.hint
    assert all("SECRET" not in auth for _, _, auth in Stub.seen)


def test_a_refresh_token_the_service_calls_invalid_grant_asks_for_a_new_login(stub):
    """Trial 12: an expired identity token (400 invalid_grant, RFC 6749 §5.2) read "answered
    HTTP 400 without a token" / "check the registry's auth configuration"."""
    Stub.token_answer = (400, b'{"error":"invalid_grant"}', "application/json")
    with pytest.raises(RegistryAuthError, match="refused the stored login") as e:
        RegistryClient(stub, insecure=True, credentials=Credentials("<token>", "refresh")
                       ).list_tags("ci/p")
    assert e.value.hint == f"log in again: docker login {stub}"


def test_a_rate_limited_token_service_is_named_a_rate_limit(stub):
    """Trial 13: the token service's 429 (Docker Hub's auth service limits too) was "answered
    HTTP 429 without a token" with the hint to check the registry's auth configuration."""
    from paddlecd.errors import RegistryRateLimitError

    Stub.token_answer = (429, b'{"errors": []}', "application/json")
    c = RegistryClient(stub, insecure=True, credentials=Credentials("bot", "pw"))
    with pytest.raises(RegistryRateLimitError, match="token service .* is rate-limiting") as e:
        c.list_tags("ci/p")
    assert "auth configuration" not in e.value.hint

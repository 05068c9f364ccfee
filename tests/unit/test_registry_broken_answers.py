"""Registry answers that break the distribution spec, from a small in-process HTTP server: each
is named as the registry's fault, never a traceback or another cause (trial 13, a fault proxy
in front of CNCF distribution). No real registry answers so; the proxy's rules are replayed."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from paddlecd.errors import ConfigError, RegistryError
from paddlecd.registry.client import RegistryClient

DIGEST = "sha256:" + "a" * 64


class Broken(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _answer(self, status, headers=(), body=b""):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if not any(k == "Content-Length" for k, _ in headers):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_POST(self):  # an upload opened without saying where it goes
        self._answer(202, [("Docker-Upload-UUID", "u1")])

    def do_HEAD(self):
        if "/blobs/" in self.path and self.path.startswith("/v2/two-lengths/"):
            self._answer(200, [("Content-Length", "1"), ("Content-Length", "0")])
        else:  # every blob "exists"
            self._answer(200, [("Content-Length", "10")])

    def do_GET(self):
        error = json.dumps({"errors": [{"code": "UNKNOWN", "message": "unknown error"}]}).encode()
        if "/manifests/" in self.path:
            self._answer(500, [("Content-Type", "application/json")], error)
        else:  # ... but none can be read
            self._answer(404, [("Content-Type", "application/json")], json.dumps(
                {"errors": [{"code": "BLOB_UNKNOWN", "message": "blob unknown"}]}).encode())


@pytest.fixture
def client():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Broken)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield RegistryClient(f"127.0.0.1:{server.server_address[1]}", insecure=True, retries=1)
    server.shutdown()


def test_an_upload_opened_without_a_location_is_named(client):
    """Trial 13: ``phase 'copy' failed: KeyError: 'location'``."""
    with pytest.raises(RegistryError) as e:
        client.upload_blob("r", DIGEST, b"x", 1)
    assert "answered 202 without the Location of the upload" in e.value.cause
    assert "KeyError" not in e.value.cause and "proxy" in e.value.hint


def test_two_unequal_content_lengths_are_a_broken_answer(client):
    """Trial 13: urllib3's "Content-Length contained multiple unmatching values" came out of
    promote with the hint "check the path"."""
    with pytest.raises(RegistryError) as e:
        client.blob_exists("two-lengths", DIGEST)
    assert "sent an answer that is not valid HTTP" in e.value.cause and client.host in e.value.cause
    assert "path" not in e.value.hint


def test_a_blob_head_that_says_yes_to_everything_makes_no_image_id(client):
    """Trial 13: a registry answering 200 to every blob HEAD had a failed manifest read of a
    manifest digest called "names an image ID"; the blob is read before that is said."""
    with pytest.raises(RegistryError) as e:
        client.get_manifest("r", DIGEST)
    assert not isinstance(e.value, ConfigError) and "image ID" not in e.value.cause


class BadDigestHeader(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    manifest = json.dumps({"schemaVersion": 2, "mediaType":
                           "application/vnd.oci.image.manifest.v1+json", "config": {
                               "mediaType": "application/vnd.oci.image.config.v1+json",
                               "digest": DIGEST, "size": 2}, "layers": []}).encode()

    def log_message(self, *args):
        pass

    def _send(self, body: bool):
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        self.send_header("Docker-Content-Digest", "sha256:xyz")
        self.send_header("Content-Length", str(len(self.manifest)))
        self.end_headers()
        if body:
            self.wfile.write(self.manifest)

    def do_HEAD(self):
        self._send(False)

    def do_GET(self):
        self._send(True)


def test_a_digest_header_that_is_no_digest_is_not_taken():
    """Trial 13: a HEAD answered ``Docker-Content-Digest: sha256:xyz``; lock wrote it into
    lock.local.yaml and every later task refused the file. The manifest's own bytes decide."""
    import hashlib

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), BadDigestHeader)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = RegistryClient(f"127.0.0.1:{server.server_address[1]}", insecure=True,
                                retries=1)
        found = client.resolve("r", "1.0.0-cpu")
    finally:
        server.shutdown()
    assert found.digest == "sha256:" + hashlib.sha256(BadDigestHeader.manifest).hexdigest()


class Forgetful(http.server.BaseHTTPRequestHandler):
    """Answers every manifest PUT 201 with the right digest, and keeps nothing."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_PUT(self):
        import hashlib

        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(201)
        self.send_header("Docker-Content-Digest", "sha256:" + hashlib.sha256(body).hexdigest())
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self):
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        body = json.dumps({"errors": [{"code": "MANIFEST_UNKNOWN", "message": "unknown"}]}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_manifest_write_answered_201_but_not_kept_is_named():
    """Trial 13: a registry that answered 201 to a tag write and kept nothing had promote say
    "tags kept changing under this promotion" (another promotion blamed), repair and verify
    say done. The write is read back and named."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forgetful)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = RegistryClient(f"127.0.0.1:{server.server_address[1]}", insecure=True,
                                retries=1)
        with pytest.raises(RegistryError) as e:
            client.put_manifest("r", "1.0.0-cpu", b"{}",
                                "application/vnd.oci.image.manifest.v1+json")
    finally:
        server.shutdown()
    assert "answered 201 but serves nothing under it (expected sha256:" in e.value.cause
    assert "did not keep the write" in e.value.hint

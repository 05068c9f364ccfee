"""doctor's registry and storage checks against a web server that answers 200 with a page
(nginx's welcome page, a sign-in portal): named as such, never "OK" (trial 13). A small
in-process HTTP server plays it; no registry or S3 server would answer so."""

from __future__ import annotations

import http.server
import threading

import pytest

from paddlecd import doctor
from paddlecd.errors import RegistryError, StorageError
from paddlecd.registry.client import RegistryClient

PAGE = b"<html><body>Welcome to nginx!</body></html>"


class WebPage(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _page(self, body: bool):
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        if body:
            self.wfile.write(PAGE)

    def do_GET(self):
        self._page(True)

    def do_HEAD(self):
        self._page(False)


@pytest.fixture
def web():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), WebPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_web_page_at_v2_is_no_registry(web):
    from paddlecd.registry.auth import Credentials

    client = RegistryClient(web, insecure=True, credentials=Credentials("tester", "pw"))
    with pytest.raises(RegistryError) as e:
        doctor._registry_api(client, web, "registry")
    assert "answered GET /v2/ with a web page" in e.value.cause
    assert "registry.url" in e.value.hint


def test_a_web_page_for_the_bucket_is_no_store(web, monkeypatch):
    from paddlecd.artifacts.storage import open_store
    from paddlecd.config import StorageSettings

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    store = open_store("s3://models/paddle", StorageSettings(endpoint_url=f"http://{web}",
                                                            region="us-east-1"))
    with pytest.raises(StorageError) as e:
        store.check()
    assert "answered HeadBucket with a web page" in e.value.cause
    assert "storage.endpoint_url" in e.value.hint

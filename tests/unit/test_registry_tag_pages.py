"""``RegistryClient.list_tags_after`` against small in-process tag-list servers: one that pages as
the OCI distribution-spec says ("Listing Tags": ``n``, ``last``, a ``Link: <…>; rel="next"``
header, tags in lexical order), and one that ignores both as distribution 2.8 does (every tag, in
storage order).

The suite's real registry is distribution 2.8.2 (Debian's docker-registry), which never pages, so
the whole-list answer is also exercised end to end by tests/integration/test_ledger.py; no paging
registry can be installed here from Debian or PyPI. The paging server below follows distribution
3.0.0's handler (registry/handlers/tags.go), against whose binary, built from source by hand, the
README's "Ledger growth" figures for a paging registry were measured.
"""

from __future__ import annotations

import http.server
import json
import threading
from urllib.parse import parse_qs, urlparse

import pytest

from paddlecd.registry.client import RegistryClient

TAGS = ["1.0.0-cpu", "latest-cpu", "ledger.cpu.20261201T000000000000Z-aaaaaaaa",
        "ledger.cpu.20261201T000100000000Z-bbbbbbbb", "ledger.cpu.20261201T000200000000Z-cccccccc",
        "ledger.cpu.checkpoint", "ledger.cpu.head", "ledger.gpu.20261201T000000000000Z-dddddddd",
        "zz-last"]


class Pages(http.server.BaseHTTPRequestHandler):
    paging = True
    seen: list[str] = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        url = urlparse(self.path)
        Pages.seen.append(url.query)
        if not url.path.startswith("/v2/ci/p/"):
            body, status = json.dumps({"errors": [{"code": "NAME_UNKNOWN", "message": "nope"}]
                                       }).encode(), 404
            headers = {"Docker-Distribution-Api-Version": "registry/2.0"}
        elif not Pages.paging:
            body, status, headers = json.dumps({"tags": TAGS[::-1]}).encode(), 200, {}
        else:
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            n, last = int(q.get("n", 1000)), q.get("last", "")
            after = [t for t in sorted(TAGS) if t > last]
            page, headers = after[:n], {}
            if len(after) > n:
                headers["Link"] = f'</v2/ci/p/tags/list?n={n}&last={page[-1]}>; rel="next"'
            body, status = json.dumps({"name": "ci/p", "tags": page}).encode(), 200
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def client():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Pages.seen, Pages.paging = [], True
    yield RegistryClient(f"127.0.0.1:{server.server_address[1]}", insecure=True)
    server.shutdown()


def test_a_paging_registry_is_read_from_last_until_past_stop(client):
    tags, whole = client.list_tags_after("ci/p", "ledger.cpu.20261201T000050", n=2,
                                         stop="ledger.cpu.:")
    assert not whole
    # two pages: the records after `last`, then the page that reaches past the stop tag
    assert tags == ["ledger.cpu.20261201T000100000000Z-bbbbbbbb",
                    "ledger.cpu.20261201T000200000000Z-cccccccc",
                    "ledger.cpu.checkpoint", "ledger.cpu.head"]
    assert len(Pages.seen) == 2 and "last=ledger.cpu.20261201T000050" in Pages.seen[0]


def test_without_stop_every_page_is_followed(client):
    tags, whole = client.list_tags_after("ci/p", "", n=2)
    assert (tags, whole) == (sorted(TAGS), False) and len(Pages.seen) == 5


def test_a_registry_that_ignores_paging_gives_the_whole_list_in_one_request(client):
    Pages.paging = False
    tags, whole = client.list_tags_after("ci/p", "ledger.cpu.20261201T000050", n=2,
                                         stop="ledger.cpu.:")
    assert whole and tags == TAGS[::-1] and len(Pages.seen) == 1


def test_a_missing_repository_has_no_tags(client):
    assert client.list_tags_after("ci/none", "x") == ([], False)

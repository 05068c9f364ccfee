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


class Rogue(http.server.BaseHTTPRequestHandler):
    """Tag pages whose ``Link`` is set by the test: to the same page, or to another host."""

    link = ""
    seen: list[tuple[str, str]] = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        Rogue.seen.append((self.path, self.headers.get("Authorization", "")))
        body = json.dumps({"name": "ci/p", "tags": ["a"]}).encode()
        self.send_response(200)
        if Rogue.link:
            self.send_header("Link", Rogue.link)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def rogue():
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), Rogue) for _ in range(2)]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    Rogue.seen = []
    yield [f"127.0.0.1:{s.server_address[1]}" for s in servers]
    for s in servers:
        s.shutdown()


def test_a_next_page_that_repeats_a_page_stops_the_listing(rogue):
    """Trial 12: a registry whose next page was the same page was listed for ever, silent."""
    from paddlecd.errors import RegistryError

    Rogue.link = '</v2/ci/p/tags/list?n=1000&last=a>; rel="next"'
    with pytest.raises(RegistryError, match="next page repeats a page already read"):
        RegistryClient(rogue[0], insecure=True).list_tags("ci/p")
    # paged by last=: the repeated tag reads as a registry that ignores last= (its whole list)
    assert RegistryClient(rogue[0], insecure=True).list_tags_after("ci/p", "0") == (["a"], True)


def test_a_next_page_on_another_host_gets_no_credentials(rogue):
    """Trial 12: a Link to another host was followed with the registry's Basic password, and
    that host's tags merged into the listing."""
    from paddlecd.errors import RegistryError
    from paddlecd.registry.auth import Credentials

    Rogue.link = f'<http://{rogue[1]}/v2/ci/p/tags/list?last=a>; rel="next"'
    client = RegistryClient(rogue[0], insecure=True, credentials=Credentials("bot", "pw"))
    with pytest.raises(RegistryError, match="next page is on another host"):
        client.list_tags("ci/p")
    assert all(rogue[1] not in path for path, _ in Rogue.seen) and len(Rogue.seen) == 1
    assert not client.same_origin(f"http://{rogue[1]}/v2/") and client.same_origin(
        f"http://{rogue[0]}/v2/x")


@pytest.mark.parametrize("listing", ["list_tags", "list_tags_after"])
def test_a_next_page_of_another_repository_is_refused(rogue, listing):
    """Trial 13: a Link to another repository's tag list on the same registry was followed, and
    its tags read as this repository's (its ledger records taken for ours)."""
    from paddlecd.errors import RegistryError

    Rogue.link = '</v2/ci/other/tags/list?n=1000&last=a>; rel="next"'
    client = RegistryClient(rogue[0], insecure=True)
    args = ("ci/p", "0") if listing == "list_tags_after" else ("ci/p",)
    with pytest.raises(RegistryError, match="next page lists another repository"):
        getattr(client, listing)(*args, **({"n": 1} if listing == "list_tags_after" else {}))
    assert all("/ci/other/" not in path for path, _ in Rogue.seen)

"""RegistryClient.each: a few requests at once over twins of one client (a promotion's
time is round trips). No registry is needed: ``fn`` stands in for the requests."""

from __future__ import annotations

import threading
import time

import pytest

from paddlecd.errors import NotFoundError
from paddlecd.registry.client import RegistryClient


def test_results_in_item_order_each_thread_with_a_client_of_its_own():
    client = RegistryClient("127.0.0.1:1", insecure=True)
    seen: dict[int, tuple[int, int]] = {}

    def fn(c: RegistryClient, item: int) -> int:
        seen[item] = (id(c), id(c.session))
        c.stats["requests"] += 1
        time.sleep(0.05)  # as a round trip
        return item * 10

    start = time.monotonic()
    assert client.each(fn, range(8)) == [i * 10 for i in range(8)]
    assert time.monotonic() - start < 0.05 * 8 * 0.75  # overlapped: one after another is 0.4 s
    clients = {c for c, _ in seen.values()}
    assert len(clients) == 4 and len({s for _, s in seen.values()}) == 4
    assert client.stats["requests"] == 8  # the twins' counts are added back
    again: set[int] = set()
    client.each(lambda c, _: again.add(id(c)), range(4))
    assert again == clients  # the twins (and their connections) are kept for the next call


def test_twins_share_what_must_not_be_asked_twice():
    client = RegistryClient("127.0.0.1:1", insecure=True)
    twin = client.twin()
    assert twin.session is not client.session and twin.stats is not client.stats
    assert twin._tokens is client._tokens and twin._cache() is client._cache()


def test_an_error_is_raised_after_every_thread_stopped():
    client = RegistryClient("127.0.0.1:1", insecure=True)
    done: list[int] = []
    lock = threading.Lock()

    def fn(c: RegistryClient, item: int) -> None:
        if item == 2:
            raise NotFoundError("tag 2 is gone", "hint")
        time.sleep(0.02)
        with lock:
            done.append(item)

    with pytest.raises(NotFoundError, match="tag 2 is gone"):
        client.each(fn, range(4))
    assert sorted(done) == [0, 1, 3]  # the others ran to the end


def test_one_item_runs_here():
    client = RegistryClient("127.0.0.1:1", insecure=True)
    assert client.each(lambda c, i: c is client, [1]) == [True]

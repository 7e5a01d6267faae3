"""The signal backlog bound on DynamoDB under concurrent senders (issue 14, point 9): the
bound is a condition of the write that numbers the signal, raced by six threads, each with
its own client, on moto's HTTP server (one lock around its app: moto's own conditional
writes are not atomic under concurrency)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from runtime.errors import SignalBacklogFull
from tests.support.moto_server import PROJECTS, World, moto_server

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

BOUND = 20
SENDERS = 6
EACH = 8


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


def test_concurrent_senders_never_take_a_run_past_the_backlog_bound(endpoint: str) -> None:
    """A run holds 15 signals; six senders try 8 more each at once against a bound of 20:
    exactly 5 are accepted, the rest refused, and 20 are pending."""
    world = World(PROJECTS / "race_ledger", endpoint=endpoint)
    front = world.runtime(owner="front")
    front.platform.start("chain", {"n": 1}, id="inbox")
    for i in range(15):
        front.store.add_signal("inbox", "junk", i, 1.0, max_backlog=BOUND)
    stores = [world.runtime(owner=f"s{i}").store for i in range(SENDERS)]
    barrier = threading.Barrier(SENDERS)
    accepted = [0] * SENDERS
    refused = [0] * SENDERS

    def send(i: int) -> None:
        barrier.wait(timeout=30)
        for n in range(EACH):
            try:
                stores[i].add_signal("inbox", "junk", 100 * i + n, 2.0, max_backlog=BOUND)
                accepted[i] += 1
            except SignalBacklogFull:
                refused[i] += 1

    threads = [threading.Thread(target=send, args=(i,)) for i in range(SENDERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sum(accepted) == BOUND - 15 and sum(refused) == SENDERS * EACH - (BOUND - 15)
    assert len(front.store.pending_signals("inbox")) == BOUND

"""The signal backlog bound on DynamoDB under concurrent senders (issue 14, point 9): the
bound is a condition of the write that numbers the signal, raced by six threads, each with
its own client, on a moto server process of its own (``runtime.aws.motoserver``: one request
at a time, since moto's own conditional writes are not atomic under concurrency)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.aws.motoserver import MotoServer
from runtime.aws.runtime import AwsRuntime
from runtime.core.clock import SystemClock
from runtime.errors import SignalBacklogFull
from runtime.testing import AwsPlatform

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "race_ledger"
BOUND = 20
SENDERS = 6
EACH = 8


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = MotoServer()
    try:
        yield server.endpoint
    finally:
        server.close()


@pytest.fixture
def p(endpoint: str) -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT, endpoint_url=endpoint, clock=SystemClock()) as p:
        yield p


def container(p: AwsPlatform, owner: str) -> AwsRuntime:
    """A Lambda container of the deployment with clients of its own."""
    return AwsRuntime(p.config, p.new_clients(), owner=owner)


def test_concurrent_senders_never_take_a_run_past_the_backlog_bound(p: AwsPlatform) -> None:
    """A run holds 15 signals; six senders try 8 more each at once against a bound of 20:
    exactly 5 are accepted, the rest refused, and 20 are pending."""
    front = container(p, "front")
    front.platform.start("chain", {"n": 1}, id="inbox")
    for i in range(15):
        front.store.add_signal("inbox", "junk", i, 1.0, max_backlog=BOUND)
    stores = [container(p, f"s{i}").store for i in range(SENDERS)]
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

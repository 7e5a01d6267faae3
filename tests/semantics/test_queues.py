"""Queues, on both harnesses: every setting of ``[queues.<name>]`` (``attempts``,
``retry_delay``, their defaults), a send's ``delay``, and the seed's "A queue handler can
start a workflow when a message turns out to need one" (SPEC section 2: "an error retries the
message, in bulk, up to the queue's attempts, then it goes to a dead-letter store").

Issue 25: under ``AwsPlatform`` a failed message came back after the queue's visibility
timeout (t=0, 370, 730) instead of its ``retry_delay`` (0, 30, 60): the queue function could
not reach its AWS services through the harness's stand-ins, and that error was swallowed.

Each handler logs ``delivered`` with the attempt and ``os.time()``; the times below are
read off those lines.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parent.parent / "projects" / "seed_queues"


@pytest.fixture
def p(harness: Any, tmp_path: Path) -> Iterator[LocalPlatform]:
    with harness(PROJECT, data_dir=tmp_path / "data") as platform:
        yield platform


def send(
    p: LocalPlatform, queue: str, n: int, *, succeed_on: int | None = None, delay: str | None = None
) -> None:
    body: dict[str, Any] = {"n": n}
    if succeed_on is not None:
        body["succeed_on"] = succeed_on
    answer = p.fetch("POST", "/", body=json.dumps({"queue": queue, "body": body, "delay": delay}))
    assert answer.status_code == 200, answer.body


def deliveries(p: LocalPlatform, queue: str, start: float) -> list[tuple[int, int]]:
    """(attempt, seconds after ``start``) of each delivery of the queue's messages."""
    return [
        (r["fields"]["attempts"], round(r["fields"]["at"] - start))
        for r in p.logs
        if r.get("message") == "delivered" and r["fields"]["queue"] == queue
    ]


def test_a_failing_message_is_retried_after_the_default_30s_three_times_in_all(p: LocalPlatform) -> None:
    """Defaults: 3 attempts, 30s apart; then no more deliveries, however long the clock runs."""
    start = p.now
    send(p, "defaults", 1)
    p.advance("1h")
    assert deliveries(p, "defaults", start) == [(1, 0), (2, 30), (3, 60)]


def test_attempts_and_retry_delay_come_from_lunaflow_toml(p: LocalPlatform) -> None:
    """`attempts = 5`, `retry_delay = "10s"`."""
    start = p.now
    send(p, "tuned", 1)
    p.advance("1h")
    assert deliveries(p, "tuned", start) == [(1, 0), (2, 10), (3, 20), (4, 30), (5, 40)]


def test_a_retry_is_not_delivered_a_second_before_its_delay(p: LocalPlatform) -> None:
    start = p.now
    send(p, "tuned", 1)
    p.advance("9s")
    assert deliveries(p, "tuned", start) == [(1, 0)]
    p.advance("1s")
    assert deliveries(p, "tuned", start) == [(1, 0), (2, 10)]


def test_attempts_past_five_are_all_delivered(p: LocalPlatform) -> None:
    """`attempts = 7`: on AWS the queue's redrive (`maxReceiveCount`) is its attempts, not the
    wake queue's 5."""
    start = p.now
    send(p, "stubborn", 1)
    p.advance("1h")
    assert deliveries(p, "stubborn", start) == [(n, 5 * (n - 1)) for n in range(1, 8)]


def test_attempts_1_delivers_a_failing_message_once(p: LocalPlatform) -> None:
    """`attempts = 1`: a non-idempotent handler runs once, whatever the retry delay."""
    start = p.now
    send(p, "once", 1)
    p.advance("2h")
    assert deliveries(p, "once", start) == [(1, 0)]


def test_a_retry_delay_longer_than_15_minutes_is_kept(p: LocalPlatform) -> None:
    """`retry_delay = "20m"` (longer than an SQS send delay, within a visibility timeout)."""
    start = p.now
    send(p, "patient", 1)
    p.advance("2h")
    assert deliveries(p, "patient", start) == [(1, 0), (2, 1200)]


def test_a_message_that_succeeds_on_a_retry_is_not_delivered_again(p: LocalPlatform) -> None:
    start = p.now
    send(p, "tuned", 1, succeed_on=3)
    p.advance("1h")
    assert deliveries(p, "tuned", start) == [(1, 0), (2, 10), (3, 20)]


def test_each_message_keeps_its_own_attempts(p: LocalPlatform) -> None:
    """Retried in bulk, counted per message."""
    start = p.now
    send(p, "defaults", 1)
    p.advance("15s")
    send(p, "defaults", 2, succeed_on=2)
    p.advance("1h")
    assert deliveries(p, "defaults", start) == [(1, 0), (1, 15), (2, 30), (2, 45), (3, 60)]


@pytest.mark.parametrize("delay", ["30s", "15m"])
def test_a_delayed_send_is_delivered_at_its_delay(p: LocalPlatform, delay: str) -> None:
    seconds = {"30s": 30, "15m": 900}[delay]
    start = p.now
    send(p, "plain", 1, delay=delay)
    p.advance(f"{seconds - 1}s")
    assert deliveries(p, "plain", start) == []
    p.advance("1h")
    assert deliveries(p, "plain", start) == [(1, seconds)]


def test_a_delayed_send_from_a_step_is_delayed_too(p: LocalPlatform) -> None:
    start = p.now
    run = p.start("sender", {"queue": "plain", "body": {"n": 7}, "delay": "2m"}, id="sender")
    assert run.status == "completed", run.error
    assert deliveries(p, "plain", start) == []
    p.advance("2m")
    assert deliveries(p, "plain", start) == [(1, 120)]


def test_a_queue_handler_can_start_a_workflow(p: LocalPlatform) -> None:
    send(p, "handoff", 9)
    run = p.get("care-9")
    assert run.status == "completed", run.error
    assert run.result == {"cared": 9}

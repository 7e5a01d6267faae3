"""Issue 15.5: the reconciler never amplifies a backlog.

On main every wake queued longer than 60 s was re-sent each minute, one ``SendMessage`` at
a time, without bound; and a run woken by a timer kept its old ``timer_due`` while it ran,
so the reconciler fired it again and it bounced. Now a reconcile re-sends at most a bounded
batch, ten to a request; each re-sent wake-up is looked at again only after a pause that
doubles; and runs whose wake is being served (a live lease) are skipped, their overdue timers
too (a timer's wake turned the timer into a wake-up until stop 54; it now leases the run at
its due timer).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.aws.contract import Handler
from runtime.aws.runtime import RECONCILE_LIMIT
from runtime.testing import AwsPlatform
from tests.support.aws_items import HeldGate, run_item
from tests.support.aws_world import later, lose_every_wake

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_limits"


@pytest.fixture
def p() -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT, objects=lambda *a: ["through"]) as platform:
        yield platform


def record_sends(p: AwsPlatform) -> list[tuple[str, list[str]]]:
    """Every SQS send as (operation, the run ids it wakes)."""
    sent: list[tuple[str, list[str]]] = []

    def single(params: dict[str, Any], **_: Any) -> None:
        sent.append(("SendMessage", [json.loads(params["MessageBody"])["run_id"]]))

    def batch(params: dict[str, Any], **_: Any) -> None:
        sent.append(("SendMessageBatch", [json.loads(e["MessageBody"])["run_id"] for e in params["Entries"]]))

    p.clients.sqs.meta.events.register("before-parameter-build.sqs.SendMessage", single)
    p.clients.sqs.meta.events.register("before-parameter-build.sqs.SendMessageBatch", batch)
    return sent


def test_one_reconcile_resends_a_bounded_batch_ten_to_a_request(p: AwsPlatform) -> None:
    for i in range(250):
        p.platform.start("approval", {}, id=f"r{i:03d}")
    lose_every_wake(p)
    later(p, 61)
    sent = record_sends(p)
    woken = p.reconcile()["rewoken"]
    assert len(woken) == RECONCILE_LIMIT == 100
    assert [op for op, _ in sent] == ["SendMessageBatch"] * 10
    assert sorted(r for _, runs in sent for r in runs) == sorted(woken)
    assert woken == [f"r{i:03d}" for i in range(100)]  # oldest first


def test_wakes_queued_behind_a_backlog_are_not_resent(p: AwsPlatform) -> None:
    """Workers behind a backlog: every run's wake waits in the queue, and is not lost. The
    reconciler adds nothing to the queue (it re-sends at most 100 less the backlog)."""
    for i in range(150):
        p.platform.start("approval", {}, id=f"q{i:03d}")
    later(p, 61)
    sent = record_sends(p)
    assert p.reconcile()["rewoken"] == []
    assert sent == []


def test_a_wake_that_stays_lost_is_not_resent_every_minute(p: AwsPlatform) -> None:
    p.platform.start("approval", {}, id="stuck")
    sent = record_sends(p)
    for _ in range(10):  # ten minutes of a queue that loses every message
        lose_every_wake(p)
        later(p, 60)
        p.reconcile()
    resent = [r for _, runs in sent for r in runs if r == "stuck"]
    assert 2 <= len(resent) <= 3  # at 1, 3 and 7 minutes: each pause doubles


def test_a_run_woken_by_its_timer_is_not_fired_again_while_it_runs() -> None:
    """Its timer's wake leases the run and leaves the due timer where it is (the crash
    backstop: since stop 54 the wake writes nothing else). The reconciler, minutes later
    while the activation still runs, finds the timer overdue and leaves it: a live lease
    serves it. The run does not bounce, and its end removes the timer."""
    gate = HeldGate("n1")
    with AwsPlatform(PROJECT, objects=gate) as platform:
        gate.platform = platform
        holder = platform.container(platform.project, owner="holder")
        platform.start("nap", {"sleep": "5m"}, id="n1")
        assert "timer_due" in run_item(platform, "n1")
        later(platform, 5 * 60)  # the timer's delayed wake is due
        args = (platform.config.wake_queue_url, platform.config.wake_queue_arn, Handler.WORKER, 900, holder)
        worker = threading.Thread(target=platform.deliver, args=args, daemon=True)
        worker.start()
        assert gate.entered.wait(30)
        item = gate.seen[0]
        assert item["status"]["S"] == "running" and "timer_due" in item and "wake_sk" not in item
        sent = record_sends(platform)
        platform.advance("3m")  # three reconciles with the timer overdue; the holder beats all along
        assert [r for _, runs in sent for r in runs if r == "n1"] == []
        assert "wake_sk" not in run_item(platform, "n1")  # not fired
        gate.release.set()
        worker.join(30)
        platform.settle()
        assert platform.get("n1").status == "completed"
        assert len(gate.seen) == 1  # one activation
        assert "timer_due" not in run_item(platform, "n1")


def test_a_run_whose_wake_is_being_served_is_not_resent() -> None:
    """A live invocation works on the run for minutes (its wake-up stays until it is done):
    the reconcile rule's runs meanwhile leave it to its holder."""
    release = threading.Event()
    entered = threading.Event()

    def gate(*_: Any) -> list[Any]:
        entered.set()
        assert release.wait(30)
        return ["through"]

    with AwsPlatform(PROJECT, objects=gate) as p:
        holder = p.container(p.project, owner="holder")
        p.platform.start("hold", {}, id="h1")
        args = (p.config.wake_queue_url, p.config.wake_queue_arn, Handler.WORKER, 900, holder)
        worker = threading.Thread(target=p.deliver, args=args, daemon=True)
        worker.start()
        assert entered.wait(30)
        sent = record_sends(p)
        p.advance("3m")  # three reconciles; the holder beats all along
        assert [r for _, runs in sent for r in runs if r == "h1"] == []
        release.set()
        worker.join(30)
        p.settle()
        assert p.get("h1").status == "awaiting"


def test_a_failed_sweep_of_expired_runs_does_not_hold_back_the_rest_of_the_reconcile(
    p: AwsPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention's sweep runs first in a reconcile; an error there (a throttled table, a
    denied call) is logged and the wake-ups are still re-sent."""
    from runtime.platform.platform import Platform

    p.platform.start("approval", {}, id="lost-wake")
    lose_every_wake(p)
    later(p, 61)

    def broken(self: Platform, limit: int = 100) -> list[str]:
        raise RuntimeError("AccessDenied: dynamodb:DeleteItem")

    monkeypatch.setattr(Platform, "expire_runs", broken)
    assert "lost-wake" in p.reconcile()["rewoken"]

"""Issue 31: a timer's wake writes nothing before its lease. Until stop 54 the worker first
turned the due timer into a wake-up (a write: 1 WRU, the timer's index entry out and the
wake-up's in) so that a crash after the lease left a wake-up for the reconciler, and the
park or end then removed the wake-up (1 index WRU more). Now the lease marks the run running
at its due timer (``MARKABLE``) and leaves the timer in the timers index: that is the crash
backstop, fired by the reconciler once it is overdue and no lease is live; the park or the
end moves or removes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.clock import now_ms
from runtime.platform.why import STUCK_AFTER_S, why
from runtime.store.base import Lease
from runtime.testing import AwsPlatform
from tests.support.aws_items import HeldGate, run_item
from tests.support.aws_world import later, lose_every_wake

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_limits"


@pytest.fixture
def p() -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT, objects=lambda *a: ["through"]) as platform:
        yield platform


def run_item_writes(p: AwsPlatform, run_id: str) -> list[str]:
    """The run item writes from now on, by what they change (their update expressions)."""
    seen: list[str] = []

    def note(model: Any, params: dict[str, Any], **_: Any) -> None:
        key = params.get("Key") or {}
        if model.name == "UpdateItem" and key == {"pk": {"S": f"RUN#{run_id}"}, "sk": {"S": "K"}}:
            seen.append(str(params["UpdateExpression"]))

    p.runtime.store._db.meta.events.register("before-parameter-build.dynamodb", note)
    return seen


def test_a_timer_wake_writes_its_lease_and_its_end_and_nothing_else(p: AwsPlatform) -> None:
    p.start("nap", {"sleep": "5m"}, id="n1")
    token = int(run_item(p, "n1")["wake_token"]["N"])
    writes = run_item_writes(p, "n1")
    p.advance("5m")
    assert p.get("n1").status == "completed"
    # Between them, the step's intent in the run item's head: a write of the journal alone.
    assert len(writes) == 3, json.dumps(writes)
    lease, intent, end = writes
    assert "summary_at" not in intent and "timer" not in intent and "wake" not in intent
    assert "lease_owner = :me" in lease and "timer_due" not in lease  # the timer left as it is
    assert "REMOVE" in end and "timer_due" in end.split("REMOVE", 1)[1]
    assert int(run_item(p, "n1")["wake_token"]["N"]) == token  # no wake-up was written


def test_a_timer_wake_reads_the_run_only_with_its_load(p: AwsPlatform) -> None:
    """The lease's write returns the wake token it was taken at. Its token did not move
    since the last lease (no signal came), and ``UPDATED_NEW`` leaves out an attribute set
    to the value it had (moto does), so the worker read the run item again for it: 1 RRU
    and a round trip a timer's wake. The write now returns the item (``ALL_NEW``, no read
    units), so the only read before the step is the load."""
    p.start("nap", {"sleep": "5m"}, id="n0")
    reads: list[str] = []

    def note(model: Any, params: dict[str, Any], **_: Any) -> None:
        if model.name in ("GetItem", "BatchGetItem", "Query") and "IndexName" not in params:
            reads.append(
                f"{model.name} {json.dumps(params.get('Key') or params.get('KeyConditionExpression'))}"
            )

    p.runtime.store._db.meta.events.register("before-parameter-build.dynamodb", note)
    p.advance("5m")
    assert p.get("n0").status == "completed"
    gets = [r for r in reads if r.startswith("GetItem") and "RUN#n0" in r]
    assert gets == [], reads
    assert 'Query "pk = :pk"' in reads, reads  # the activation's load, which reads the run


def test_a_worker_that_dies_after_a_timer_s_lease_leaves_the_run_to_the_reconciler(p: AwsPlatform) -> None:
    p.start("nap", {"sleep": "5m"}, id="n2")
    later(p, 5 * 60)
    lose_every_wake(p)  # the timer's wake is taken by the worker below, which then dies
    store = p.runtime.store
    assert store.acquire_lease("n2", "dead-worker", now_ms(p._clock), 30_000) == Lease.OK
    item = run_item(p, "n2")
    assert item["status"]["S"] == "running" and "timer_due" in item  # marked, at its due timer
    assert "wake_sk" not in item
    later(p, 20)
    p.reconcile()  # overdue by a minute, but a lease is live: left alone
    assert "wake_sk" not in run_item(p, "n2")
    p.advance("2m")  # the lease has lapsed: the reconciler fires the timer and sends the run on
    assert p.get("n2").status == "completed"


def test_why_names_the_worker_that_took_a_timer_and_stopped(p: AwsPlatform) -> None:
    """The run's timer did fire: a worker's lease at it marked the run running and the worker
    stopped. ``why`` names that worker and its lease's end, where it said the timer "has not
    fired"."""
    p.start("nap", {"sleep": "5m"}, id="n5")
    store = p.platform.store
    due = store.timer("n5")
    assert due is not None
    later(p, 5 * 60)
    lose_every_wake(p)
    assert store.acquire_lease("n5", "worker-gone", due, 30_000) == Lease.OK
    run = p.get("n5")
    assert run.status == "running"
    now = due / 1000 + STUCK_AFTER_S + 1
    late = why(run, store.journal("n5"), store.timer("n5"), store.progress("n5"), now)
    assert late.stuck and late.text.startswith(
        "stuck: its timer was due at 2026-01-01 00:05:00 UTC; worker-gone took the run at it and "
        "its lease ran out at 2026-01-01 00:05:30 UTC"
    ), late.text


def test_a_lease_at_a_timer_not_yet_due_does_not_mark_the_run(p: AwsPlatform) -> None:
    """A wake with no work (a duplicate, or one that came after the work was done) finds
    the run parked on a timer still in the future: leased, not marked running."""
    p.start("nap", {"sleep": "1h"}, id="n3")
    assert p.get("n3").status == "sleeping"
    store = p.runtime.store
    assert store.acquire_lease("n3", "someone", now_ms(p._clock), 30_000) == Lease.OK
    assert run_item(p, "n3")["status"]["S"] == "sleeping"
    store.release_lease("n3", "someone")
    p.advance("1h")
    assert p.get("n3").status == "completed"


def test_a_new_generation_after_a_timer_s_wake_keeps_something_to_wake_it() -> None:
    """A timer's wake leased the run at its due timer, its only backstop; the activation's
    ``continue_as_new`` clears the timer, so its write records a wake-up (no new token: the
    same activation goes on and parks). Found by a review: the new generation's step ran
    with neither, and a worker that died there left the run for good."""
    import threading

    gate = HeldGate("c1")
    with AwsPlatform(PROJECT, objects=gate) as platform:
        gate.platform = platform
        platform.start("napcontinue", {}, id="c1")
        assert platform.get("c1").status == "sleeping"
        later(platform, 5 * 60)
        from runtime.aws.contract import Handler

        args = (platform.config.wake_queue_url, platform.config.wake_queue_arn, Handler.WORKER, 900)
        worker = threading.Thread(target=platform.deliver, args=args, daemon=True)
        worker.start()
        assert gate.entered.wait(30)
        item = gate.seen[0]  # the new generation's step, running
        assert item["status"]["S"] == "running" and "timer_due" not in item
        assert "wake_sk" in item and "wake_pk" in item  # the reconciler would find it
        gate.release.set()
        worker.join(30)
        platform.settle()
        assert platform.get("c1").status == "completed"
        assert "wake_sk" not in run_item(platform, "c1")


def test_runs_running_at_their_due_timers_do_not_hide_a_lost_timer_behind_them(p: AwsPlatform) -> None:
    """The reconciler fires at most ``limit`` overdue timers a reconcile; runs being
    advanced for their timers (leased, their timers left due) are passed over by a read of
    their leases, not counted against it nor written to. Found by a review: three such runs
    at the head of the index kept a lost timer behind them from ever being fired."""
    for i in range(3):
        p.start("nap", {"sleep": "5m"}, id=f"a{i}")
    p.start("nap", {"sleep": "6m"}, id="late")
    later(p, 5 * 60)
    lose_every_wake(p)
    store = p.runtime.store
    for i in range(3):  # three long activations, alive (a long lease stands for its renewals)
        assert store.acquire_lease(f"a{i}", "alive", now_ms(p._clock), 3_600_000) == Lease.OK
    later(p, 60)
    lose_every_wake(p)  # late's timer wake is lost
    later(p, 3 * 60)
    writes = run_item_writes(p, "a0")
    assert "late" in p.runtime.reconcile(limit=3)
    assert writes == []  # a leased run's timer is not tried


def test_a_dead_owner_s_lease_is_taken_over_at_a_due_timer_and_marks_the_run(p: AwsPlatform) -> None:
    """An owner that leased a sleeping run (its timer not yet due: no mark) and died holds
    it past its timer; the timer's wake takes the lease over from the dead owner and marks
    the run running, as it would a free one."""
    p.start("nap", {"sleep": "1h"}, id="n4")
    store = p.runtime.store
    now = now_ms(p._clock)
    store.heartbeat("old", now)
    assert store.acquire_lease("n4", "old", now, 3 * 3_600_000) == Lease.OK
    assert run_item(p, "n4")["status"]["S"] == "sleeping"
    later(p, 3600)  # its owner has stopped beating; the timer is due
    lose_every_wake(p)
    assert store.acquire_lease("n4", "new", now_ms(p._clock), 30_000) == Lease.OK
    item = run_item(p, "n4")
    assert item["lease_owner"]["S"] == "new" and item["status"]["S"] == "running"

"""Issue 31.2: a run's schedule is noted by the write that parks or ends the run.

A long timer's EventBridge Scheduler entry is noted on the run item (``armed``), so a re-park
at the same time schedules nothing new and an end deletes a schedule only if there is one.
The note used to be a write of its own after the park (``SET armed``) and another after the
end (``REMOVE armed``): 4 of the auction's 34 WRU. Now the summary write that parks or ends
the run carries it, and the schedule is created before that write, so a crash between the
two leaves only an early wake (which the worker sends back: ``test_timers.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from functions import fetch, worker
from runtime.aws.runtime import AwsRuntime
from runtime.core.clock import FakeClock, now_ms
from runtime.store.dynamodb import run_key
from tests.support.aws_events import PROJECTS, http_event
from tests.support.aws_world import AwsWorld, FakeContext, run_due, schedules

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rt(make_runtime: Callable[..., AwsRuntime], clock: FakeClock) -> AwsRuntime:
    return make_runtime(PROJECTS / "aws_timers", clock=clock)


class Calls:
    """Every DynamoDB write and Scheduler call the runtime makes, in order."""

    def __init__(self, rt: AwsRuntime) -> None:
        self.seen: list[tuple[str, str]] = []  # (operation, its update expression)
        for client in (rt.store._db, rt.waker._scheduler):
            client.meta.events.register("provide-client-params", self._params)

    def _params(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in ("UpdateItem", "PutItem", "TransactWriteItems", "DeleteItem") or (
            model.service_model.service_name == "scheduler"
        ):
            self.seen.append((model.name, str(params.get("UpdateExpression", ""))))

    def notes(self) -> list[str]:
        """The writes that touch ``armed``: each must carry more than the note."""
        return [expr for op, expr in self.seen if "armed" in expr]


def armed(rt: AwsRuntime, run_id: str) -> list[Any] | None:
    item = rt.store._db.get_item(TableName=rt.store.table, Key=run_key(run_id), ConsistentRead=True)["Item"]
    return None if "armed" not in item else json.loads(item["armed"]["S"])


def test_a_long_park_notes_its_schedule_in_the_park_write_made_after_the_schedule(
    rt: AwsRuntime, aws: AwsWorld, clock: FakeClock
) -> None:
    rt.platform.start("nap", {"sleep": "24h"}, id="nap-1")
    calls = Calls(rt)
    run_due(aws, clock.now(), worker.handler)
    assert rt.platform.get("nap-1").status == "sleeping"
    due = now_ms(clock) + 24 * 3600 * 1000
    assert armed(rt, "nap-1") == [due, "schedule"]
    [note] = calls.notes()
    # The park's summary (status, timer and the note in one write), not a write of its own.
    assert "status_pk" in note and "timer_due" in note and "SET armed" not in note[:10]
    ops = [op for op, _ in calls.seen]
    assert ops.index("CreateSchedule") < next(i for i, (_, e) in enumerate(calls.seen) if "armed" in e)
    assert len(schedules(aws.scheduler, aws.group)) == 1


def test_an_end_clears_the_note_in_the_end_write_and_deletes_the_schedule(
    rt: AwsRuntime, aws: AwsWorld, clock: FakeClock
) -> None:
    rt.platform.start("approval", {}, id="appr-1")
    run_due(aws, clock.now(), worker.handler)
    assert armed(rt, "appr-1") is not None
    calls = Calls(rt)
    assert fetch.handler(http_event("POST", "/approve/appr-1"), FakeContext())["statusCode"] == 202
    run_due(aws, clock.now(), worker.handler)
    assert rt.platform.get("appr-1").status == "completed"
    assert armed(rt, "appr-1") is None
    [note] = calls.notes()
    assert "REMOVE" in note and "#st = :st" in note  # the end's own write
    assert "DeleteSchedule" in [op for op, _ in calls.seen]
    assert schedules(aws.scheduler, aws.group) == []


def test_a_second_long_wait_moves_the_note_with_its_park(
    rt: AwsRuntime, aws: AwsWorld, clock: FakeClock
) -> None:
    rt.platform.start("two-naps", {}, id="naps")
    run_due(aws, clock.now(), worker.handler)
    first = armed(rt, "naps")
    assert first is not None
    clock.advance(24 * 3600)
    calls = Calls(rt)
    run_due(aws, clock.now(), worker.handler)
    second = armed(rt, "naps")
    assert second is not None and second[0] == first[0] + 48 * 3600 * 1000
    assert len(calls.notes()) == 1 and "status_pk" in calls.notes()[0]
    clock.advance(48 * 3600)
    run_due(aws, clock.now(), worker.handler)
    assert rt.platform.get("naps").status == "completed"
    assert armed(rt, "naps") is None and schedules(aws.scheduler, aws.group) == []


def test_a_cancel_outside_an_activation_still_clears_the_note_and_the_schedule(
    rt: AwsRuntime, aws: AwsWorld, clock: FakeClock
) -> None:
    rt.platform.start("nap", {"sleep": "24h"}, id="nap-c")
    run_due(aws, clock.now(), worker.handler)
    assert fetch.handler(http_event("POST", "/cancel/nap-c"), FakeContext())["statusCode"] == 202
    assert rt.platform.get("nap-c").status == "cancelled"
    assert armed(rt, "nap-c") is None
    assert schedules(aws.scheduler, aws.group) == []

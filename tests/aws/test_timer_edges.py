"""Issue 15.6: timers fire at or after their time, never early, and leave no schedule a run
no longer needs.

On main ``at()`` carried seconds but Scheduler fires anywhere in the minute around it (one
wasted replay for an early firing), switching a run from a long timer to a short one left
the old schedule, and ``DeleteSchedule`` was called at every run end whether or not a
schedule existed. The transport armed for each run's timer is now kept on its run item.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.aws.motoserver import at_ms
from runtime.aws.wake import schedule_name
from runtime.testing import AwsPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_limits"


class Calls:
    def __init__(self) -> None:
        self.steps: list[float] = []


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def p(calls: Calls) -> Iterator[AwsPlatform]:
    def gate(*_: Any) -> list[Any]:
        calls.steps.append(platform.now)
        return ["through"]

    with AwsPlatform(PROJECT, objects=gate) as platform:
        yield platform


def schedules(p: AwsPlatform) -> list[dict[str, Any]]:
    scheduler = p.clients.scheduler
    group = p.config.scheduler_group
    return [
        scheduler.get_schedule(Name=s["Name"], GroupName=group)
        for s in scheduler.list_schedules(GroupName=group)["Schedules"]
    ]


def count(p: AwsPlatform, service: str, operation: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    client = getattr(p.clients, service)
    client.meta.events.register(
        f"before-parameter-build.{service}.{operation}", lambda params, **_: seen.append(params)
    )
    return seen


def test_a_schedule_that_fires_early_wakes_nothing_and_the_run_wakes_on_time(
    p: AwsPlatform, calls: Calls
) -> None:
    """Scheduler fires a one-time schedule up to a minute early: the worker sends the wake
    back for the seconds it still has, without replaying the run."""
    p.start("nap", {"sleep": "1h"}, id="n1")
    [schedule] = schedules(p)
    due = at_ms(schedule["ScheduleExpression"])
    assert due is not None and due == int(p.now * 1000) + 3_600_000
    leases = count(p, "dynamodb", "UpdateItem")
    p._move_clock(due - 59_000)  # 59 s early: Scheduler sends the target input now
    p.clients.sqs.send_message(QueueUrl=p.config.wake_queue_url, MessageBody=schedule["Target"]["Input"])
    p.clients.scheduler.delete_schedule(Name=schedule["Name"], GroupName=p.config.scheduler_group)
    p.settle()
    assert [u for u in leases if "lease_owner = :me" in u.get("UpdateExpression", "")] == []  # no replay
    assert p.get("n1").status == "sleeping"
    p.advance("58s")
    assert p.get("n1").status == "sleeping" and calls.steps == []
    p.advance("1s")
    assert p.get("n1").status == "completed"
    assert calls.steps == [due / 1000]


def test_a_run_that_moves_from_a_long_timer_to_a_short_one_keeps_no_schedule(p: AwsPlatform) -> None:
    p.start("switch", {}, id="s1")
    assert [s["Name"] for s in schedules(p)] == [schedule_name("s1")]  # the 1h timeout
    p.signal("s1", "x", 1)  # now waiting on "y" for 10 s: an SQS delay
    assert p.get("s1").status == "awaiting"
    assert schedules(p) == []
    p.advance("10s")
    assert p.get("s1").result == {}  # "y" timed out (nil), on time


def test_a_run_with_no_schedule_deletes_none(p: AwsPlatform) -> None:
    deletes = count(p, "scheduler", "DeleteSchedule")
    p.start("nap", {"sleep": "10s"}, id="short")
    p.advance("10s")
    assert p.get("short").status == "completed"
    p.start("approval", {}, id="cut-short")  # a 24h timeout: a schedule
    p.cancel("cut-short")
    assert [d["Name"] for d in deletes] == [schedule_name("cut-short")]
    assert schedules(p) == []


def test_a_re_park_at_the_same_time_schedules_nothing_new(p: AwsPlatform) -> None:
    """A wake that changes nothing (a signal the wait is not for) re-parks the run at the
    same due time: its schedule still stands, so nothing is created or updated."""
    p.start("nap", {"sleep": "1h"}, id="same")
    creates, updates = count(p, "scheduler", "CreateSchedule"), count(p, "scheduler", "UpdateSchedule")
    p.signal("same", "unrelated", 1)
    assert creates == [] and updates == []
    p.advance("1h")
    assert p.get("same").status == "completed"


def test_a_sleep_under_a_second_wakes_after_a_second_never_before(p: AwsPlatform) -> None:
    """SQS delays are whole seconds: on AWS a 100ms sleep resumes after 1 s (LocalPlatform
    resumes it at 100ms; tests/semantics deselects that case here)."""
    p.start("nap", {"sleep": "100ms"}, id="tiny")
    p.advance("999ms")
    assert p.get("tiny").status == "sleeping"
    p.advance("1ms")
    assert p.get("tiny").status == "completed"

"""Timers on AWS: EventBridge Scheduler one-time schedules for long waits, SQS per-message
delay for waits due within 15 minutes. moto fires neither: tests/support/aws_world.py delivers due
ones at the fake time."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from functions import fetch, worker
from runtime.aws.runtime import AwsRuntime
from runtime.aws.wake import MAX_SQS_DELAY_S, schedule_name
from runtime.core.clock import FakeClock, now_ms
from tests.support.aws_events import PROJECTS, http_event, load_event
from tests.support.aws_world import (
    AwsWorld,
    FakeContext,
    at_seconds,
    deliver,
    fire_due_schedules,
    queued,
    release_due_delays,
    run_due,
    schedules,
)

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")

TIMERS = PROJECTS / "aws_timers"
NAME = re.compile(r"^[0-9a-zA-Z\-_.]{1,64}$")  # Scheduler's rule for schedule names


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rt(make_runtime: Callable[..., AwsRuntime], clock: FakeClock) -> AwsRuntime:
    return make_runtime(TIMERS, clock=clock)


def park(rt: AwsRuntime, aws: AwsWorld, workflow: str, input_value: object, run_id: str) -> None:
    rt.platform.start(workflow, input_value, id=run_id)
    run_due(aws, rt.clock.now(), worker.handler)


def timer_messages(aws: AwsWorld) -> list[tuple[dict[str, object], int]]:
    return [(m.data, m.delay_s) for m in queued(aws.wake_queue) if m.data and m.data.get("reason") == "timer"]


def test_long_sleep_is_a_one_time_schedule_with_flexible_window_off_and_delete_after(
    rt: AwsRuntime, aws: AwsWorld, clock: FakeClock
) -> None:
    """Issue: "EventBridge Scheduler one-time schedules (`at(...)`, flexible window off,
    `ActionAfterCompletion=DELETE`, names within the 64-character limit) that wake the run"."""
    park(rt, aws, "nap", {"sleep": "24h"}, "nap-1")
    assert rt.platform.get("nap-1").status == "sleeping"
    [s] = schedules(aws.scheduler, aws.group)
    due_s = clock.now() + 24 * 3600
    assert (
        s["ScheduleExpression"]
        == "at(" + datetime.fromtimestamp(due_s, UTC).strftime("%Y-%m-%dT%H:%M:%S") + ")"
    )
    assert s["ScheduleExpressionTimezone"] == "UTC"
    assert s["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert s["ActionAfterCompletion"] == "DELETE"
    assert NAME.match(s["Name"]) and len(s["Name"]) <= 64
    target = s["Target"]
    assert target["Arn"] == aws.wake_arn
    assert target["RoleArn"] == aws.role_arn
    assert json.loads(target["Input"]) == {"run_id": "nap-1", "reason": "timer", "due_ms": int(due_s * 1000)}
    assert timer_messages(aws) == []  # not also an SQS delay


def test_schedule_fires_and_wakes_the_run(rt: AwsRuntime, aws: AwsWorld, clock: FakeClock) -> None:
    """The schedule's Input reaches the wake queue at its time; the worker finishes the run;
    the fired one-time schedule is gone."""
    park(rt, aws, "nap", {"sleep": "24h"}, "nap-2")
    clock.advance(24 * 3600 - 1)
    assert fire_due_schedules(aws.scheduler, aws.sqs, aws.group, clock.now()) == []
    assert rt.platform.get("nap-2").status == "sleeping"
    clock.advance(1)
    run_due(aws, clock.now(), worker.handler)
    run = rt.platform.get("nap-2")
    assert run.status == "completed" and run.result == {"slept": "24h"}
    assert schedules(aws.scheduler, aws.group) == []


def test_scheduler_target_input_is_the_wake_the_worker_takes(
    rt: AwsRuntime, aws: AwsWorld, clock: FakeClock
) -> None:
    """The schedule's Target.Input is the body the worker receives when it fires
    (tests/events/scheduler_target_input.json, a 72h timer from the fake clock's start)."""
    park(rt, aws, "nap", {"sleep": "72h"}, "sale-lot-7")
    event = load_event("scheduler_target_input.json")
    [s] = schedules(aws.scheduler, aws.group)
    assert json.loads(s["Target"]["Input"]) == json.loads(event["Records"][0]["body"])
    clock.advance(72 * 3600)
    event["Records"][0]["eventSourceARN"] = aws.wake_arn
    assert worker.handler(event, FakeContext()) == {"batchItemFailures": []}
    assert rt.platform.get("sale-lot-7").status == "completed"


def test_schedule_names_stay_within_64_characters_for_any_run_id(aws: AwsWorld) -> None:
    """Run ids may be 200 bytes; schedule names are at most 64 of [0-9a-zA-Z-_.]."""
    ids = ["a", "sale-lot-42", "x" * 200, "ünïcødé ids with spaces & symbols!", "a.b_c-d"]
    names = [schedule_name(i) for i in ids]
    assert all(NAME.match(n) for n in names), names
    assert len(set(names)) == len(ids)
    assert schedule_name("sale-lot-42") == schedule_name("sale-lot-42")


def test_long_run_id_gets_a_schedule_that_scheduler_accepts(rt: AwsRuntime, aws: AwsWorld) -> None:
    run_id = "r" * 200
    park(rt, aws, "nap", {"sleep": "2d"}, run_id)
    [s] = schedules(aws.scheduler, aws.group)
    assert NAME.match(s["Name"])
    assert json.loads(s["Target"]["Input"])["run_id"] == run_id


def test_two_second_backoff_is_an_sqs_delay_not_a_schedule(
    rt: AwsRuntime, aws: AwsWorld, clock: FakeClock
) -> None:
    """Issue: "waits due within 15 minutes go through SQS per-message delay instead: a
    2-second backoff must not take a minute" (Scheduler fires within a minute)."""
    park(rt, aws, "flaky", {}, "flaky-1")
    assert rt.platform.get("flaky-1").status == "sleeping"
    assert schedules(aws.scheduler, aws.group) == []
    [(body, delay)] = timer_messages(aws)
    assert body == {"run_id": "flaky-1", "reason": "timer", "due_ms": now_ms(clock) + 2000}
    assert delay == 2
    clock.advance(2)
    run_due(aws, clock.now(), worker.handler)
    run = rt.platform.get("flaky-1")
    assert run.status == "completed"
    assert run.result == "ok on flaky-1/try/1/2"


@pytest.mark.parametrize(("sleep", "delay"), [("1s", 1), ("10m", 600), ("15m", MAX_SQS_DELAY_S)])
def test_waits_due_within_15_minutes_use_sqs_delay(
    rt: AwsRuntime, aws: AwsWorld, sleep: str, delay: int
) -> None:
    park(rt, aws, "nap", {"sleep": sleep}, f"nap-{sleep}")
    assert schedules(aws.scheduler, aws.group) == []
    assert [d for _, d in timer_messages(aws)] == [delay]


def test_wait_just_over_15_minutes_uses_a_schedule(rt: AwsRuntime, aws: AwsWorld) -> None:
    park(rt, aws, "nap", {"sleep": "15m1s"}, "nap-over")
    assert timer_messages(aws) == []
    assert len(schedules(aws.scheduler, aws.group)) == 1


def test_sqs_delayed_timer_is_not_delivered_before_its_time(
    rt: AwsRuntime, aws: AwsWorld, clock: FakeClock
) -> None:
    park(rt, aws, "nap", {"sleep": "10m"}, "nap-10m")
    clock.advance(599)
    assert release_due_delays(aws.wake_queue, now_ms(clock)) == 0
    assert deliver(aws.sqs, aws.wake_url, aws.wake_arn, worker.handler) is None
    clock.advance(1)
    run_due(aws, clock.now(), worker.handler)
    assert rt.platform.get("nap-10m").status == "completed"


def test_repeated_timer_delivery_is_harmless(rt: AwsRuntime, aws: AwsWorld, clock: FakeClock) -> None:
    """Issue: "A late or repeated timer delivery is harmless": the same timer message
    delivered again after the run moved on changes nothing."""
    park(rt, aws, "nap", {"sleep": "24h"}, "nap-rep")
    [s] = schedules(aws.scheduler, aws.group)
    clock.advance(24 * 3600)
    run_due(aws, clock.now(), worker.handler)
    assert rt.platform.get("nap-rep").status == "completed"
    journal = rt.platform.journal("nap-rep")
    for _ in range(2):
        aws.sqs.send_message(QueueUrl=aws.wake_url, MessageBody=s["Target"]["Input"])
    run_due(aws, clock.now(), worker.handler)
    assert rt.platform.journal("nap-rep") == journal
    assert rt.platform.get("nap-rep").status == "completed"
    assert schedules(aws.scheduler, aws.group) == []


def test_late_timer_delivery_still_wakes_the_run(rt: AwsRuntime, aws: AwsWorld, clock: FakeClock) -> None:
    """A schedule that fires late (Scheduler may take up to a minute; an outage longer) wakes
    the run as an on-time one would."""
    park(rt, aws, "nap", {"sleep": "24h"}, "nap-late")
    clock.advance(24 * 3600 + 3 * 3600)
    run_due(aws, clock.now(), worker.handler)
    run = rt.platform.get("nap-late")
    assert run.status == "completed" and run.result == {"slept": "24h"}


def test_early_timer_delivery_reparks_the_run_under_one_schedule(
    rt: AwsRuntime, aws: AwsWorld, clock: FakeClock
) -> None:
    """A timer message that arrives before its time (a duplicate, a stale message) wakes
    nothing early: the run stays sleeping, its journal unchanged, still one schedule."""
    park(rt, aws, "nap", {"sleep": "24h"}, "nap-early")
    [s] = schedules(aws.scheduler, aws.group)
    journal = rt.platform.journal("nap-early")
    clock.advance(3600)
    aws.sqs.send_message(QueueUrl=aws.wake_url, MessageBody=s["Target"]["Input"])
    run_due(aws, clock.now(), worker.handler)
    assert rt.platform.get("nap-early").status == "sleeping"
    assert rt.platform.journal("nap-early") == journal
    [again] = schedules(aws.scheduler, aws.group)
    assert again["Name"] == s["Name"] and again["ScheduleExpression"] == s["ScheduleExpression"]


def test_second_long_wait_of_a_run_gets_a_new_schedule_at_its_time(
    rt: AwsRuntime, aws: AwsWorld, clock: FakeClock
) -> None:
    """One schedule per parked run: after the first fires, the next wait gets its own."""
    park(rt, aws, "two-naps", {}, "naps")
    [first] = schedules(aws.scheduler, aws.group)
    clock.advance(24 * 3600)
    run_due(aws, clock.now(), worker.handler)
    assert rt.platform.get("naps").status == "sleeping"
    [second] = schedules(aws.scheduler, aws.group)
    assert at_seconds(second["ScheduleExpression"]) == at_seconds(first["ScheduleExpression"]) + 48 * 3600
    clock.advance(48 * 3600)
    run_due(aws, clock.now(), worker.handler)
    assert rt.platform.get("naps").status == "completed"
    assert schedules(aws.scheduler, aws.group) == []


def test_cancelled_run_leaves_no_schedule(rt: AwsRuntime, aws: AwsWorld) -> None:
    """Issue: "a run that ends or is cancelled leaves no schedule that could do harm"."""
    park(rt, aws, "nap", {"sleep": "24h"}, "nap-cancel")
    assert len(schedules(aws.scheduler, aws.group)) == 1
    answer = fetch.handler(http_event("POST", "/cancel/nap-cancel"), FakeContext())
    assert answer["statusCode"] == 202
    assert rt.platform.get("nap-cancel").status == "cancelled"
    assert schedules(aws.scheduler, aws.group) == []


def test_run_ended_by_a_signal_leaves_no_schedule(rt: AwsRuntime, aws: AwsWorld) -> None:
    """The await's 24h timeout schedule goes when a signal ends the wait and the run."""
    park(rt, aws, "approval", {}, "appr-1")
    assert rt.platform.get("appr-1").status == "awaiting"
    assert len(schedules(aws.scheduler, aws.group)) == 1
    assert fetch.handler(http_event("POST", "/approve/appr-1"), FakeContext())["statusCode"] == 202
    run_due(aws, rt.clock.now(), worker.handler)
    run = rt.platform.get("appr-1")
    assert run.status == "completed" and run.result == {"approved": True, "by": "ada"}
    assert schedules(aws.scheduler, aws.group) == []


def test_await_timeout_fires_through_the_schedule(rt: AwsRuntime, aws: AwsWorld, clock: FakeClock) -> None:
    park(rt, aws, "approval", {}, "appr-2")
    clock.advance(24 * 3600)
    run_due(aws, clock.now(), worker.handler)
    run = rt.platform.get("appr-2")
    assert run.status == "completed" and run.result == {"approved": False}


def test_delayed_timer_for_a_cancelled_run_is_harmless(
    rt: AwsRuntime, aws: AwsWorld, clock: FakeClock
) -> None:
    """An SQS delayed message cannot be taken back: when it arrives for a cancelled run, the
    run stays cancelled and its journal is unchanged."""
    park(rt, aws, "nap", {"sleep": "10m"}, "nap-c10")
    assert len(timer_messages(aws)) == 1
    rt.platform.cancel("nap-c10")
    journal = rt.platform.journal("nap-c10")
    clock.advance(600)
    assert run_due(aws, clock.now(), worker.handler) == 1
    assert rt.platform.get("nap-c10").status == "cancelled"
    assert rt.platform.journal("nap-c10") == journal
    assert schedules(aws.scheduler, aws.group) == []

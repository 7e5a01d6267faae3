"""functions/worker.py: the wake queue (SQS) advances runs, one record at a time, with
failures reported per record; a run with more work than one invocation's time continues in
a fresh invocation before the Lambda deadline."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

import functions._runtime as container
from functions import worker
from runtime.aws.invocation import SAFETY_S
from runtime.aws.runtime import BUSY_FIRST_S, AwsRuntime
from runtime.core.clock import FakeClock, now_ms
from runtime.core.journal import Kind
from runtime.store.dynamodb import RUN_SK
from tests.support.aws_events import PROJECTS, load_event
from tests.support.aws_world import AwsWorld, FakeContext, deliver, queued, receive, run_due, sqs_record

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")

TIMERS = PROJECTS / "aws_timers"
LONG = PROJECTS / "aws_long"


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    got: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            got.append(record)

    handler = Keep(level=logging.DEBUG)
    base = container.logger._logger
    base.addHandler(handler)
    yield got
    base.removeHandler(handler)


def wake_event(*bodies: str, arn: str) -> dict[str, Any]:
    """A wake-queue event shaped like tests/events/sqs_wake.json, one record per body."""
    template = load_event("sqs_wake.json")["Records"][0]
    out = []
    for i, body in enumerate(bodies):
        record = copy.deepcopy(template)
        record["messageId"] = f"00000000-0000-4000-8000-{i:012d}"
        record["receiptHandle"] = f"handle-{i}"
        record["body"] = body
        record["eventSourceARN"] = arn
        out.append(record)
    return {"Records": out}


def wake(run_id: str) -> str:
    return json.dumps({"run_id": run_id, "reason": "wake"})


def purge(aws: AwsWorld) -> None:
    """Take every message off the wake queue (the test then sends the events itself)."""
    for m in queued(aws.wake_queue):
        assert not m.delayed, m
    while True:
        got = receive(aws.sqs, aws.wake_url)
        if not got:
            return
        for m in got:
            aws.sqs.delete_message(QueueUrl=aws.wake_url, ReceiptHandle=m["ReceiptHandle"])


def test_wake_event_advances_the_run_it_names(make_runtime: Callable[..., AwsRuntime], aws: AwsWorld) -> None:
    """The worker takes the wake queue's records (tests/events/sqs_wake.json) and advances
    each run named in a body."""
    rt = make_runtime(TIMERS)
    rt.platform.start("nap", {"sleep": "24h"}, id="sale-lot-7")
    purge(aws)
    event = load_event("sqs_wake.json")
    event["Records"][0]["eventSourceARN"] = aws.wake_arn
    answer = worker.handler(event, FakeContext())
    assert answer == {"batchItemFailures": []}
    assert rt.platform.get("sale-lot-7").status == "sleeping"


def test_start_sends_a_wake_message_the_worker_consumes(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld
) -> None:
    """A start writes the run and sends one wake message; the worker's delivery parks it."""
    rt = make_runtime(TIMERS)
    rt.platform.start("approval", {}, id="appr-1")
    bodies = [json.loads(m.body) for m in queued(aws.wake_queue)]
    assert bodies == [{"run_id": "appr-1", "reason": "wake"}]
    got = deliver(aws.sqs, aws.wake_url, aws.wake_arn, worker.handler)
    assert got is not None and got[1] == {"batchItemFailures": []}
    assert rt.platform.get("appr-1").status == "awaiting"
    assert queued(aws.wake_queue) == []


def test_one_bad_record_fails_alone(make_runtime: Callable[..., AwsRuntime], aws: AwsWorld) -> None:
    """Partial batch failure: a record whose run cannot be advanced is reported in
    batchItemFailures; the others in the batch are advanced and not retried."""
    rt = make_runtime(TIMERS)
    rt.platform.start("approval", {}, id="good-1")
    rt.platform.start("approval", {}, id="good-2")
    purge(aws)
    # A run item the store cannot read (no workflow, input or journal): advancing it raises.
    aws.dynamodb.put_item(
        TableName=aws.table,
        Item={"pk": {"S": "RUN#broken"}, "sk": {"S": RUN_SK}, "id": {"S": "broken"}},
    )
    event = wake_event(wake("good-1"), wake("broken"), wake("good-2"), arn=aws.wake_arn)
    answer = worker.handler(event, FakeContext())
    assert answer == {"batchItemFailures": [{"itemIdentifier": event["Records"][1]["messageId"]}]}
    assert rt.platform.get("good-1").status == "awaiting"
    assert rt.platform.get("good-2").status == "awaiting"


def test_a_failed_record_leaves_its_run_free_for_the_retry(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld
) -> None:
    """A record that fails releases the run's lease, so its retry is not refused as busy (a
    batch whose every record failed is retried whole by Lambda)."""
    make_runtime(TIMERS)
    key = {"pk": {"S": "RUN#broken"}, "sk": {"S": RUN_SK}}
    aws.dynamodb.put_item(TableName=aws.table, Item={**key, "id": {"S": "broken"}})
    event = wake_event(wake("broken"), wake("broken"), arn=aws.wake_arn)
    with pytest.raises(BatchProcessingError, match="All records failed"):
        worker.handler(event, FakeContext())
    assert "lease_owner" not in aws.dynamodb.get_item(TableName=aws.table, Key=key)["Item"]
    assert queued(aws.wake_queue) == []  # neither record was taken for a busy run


def test_wake_body_without_a_run_id_is_dropped(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld, records: list[logging.LogRecord]
) -> None:
    """A malformed wake body is dropped with a warning, not retried to the dead-letter queue."""
    rt = make_runtime(TIMERS)
    rt.platform.start("approval", {}, id="ok-1")
    purge(aws)
    event = wake_event(
        json.dumps({"reason": "wake"}), json.dumps({"run_id": ""}), wake("ok-1"), arn=aws.wake_arn
    )
    answer = worker.handler(event, FakeContext())
    assert answer == {"batchItemFailures": []}
    assert rt.platform.get("ok-1").status == "awaiting"
    assert any(r.levelno == logging.WARNING and "dropped" in r.getMessage() for r in records)


@pytest.mark.parametrize("body", ["not json at all", "[1, 2]", "null"])
def test_wake_body_that_is_not_a_json_object_is_dropped(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld, body: str
) -> None:
    """A malformed wake body is dropped: retrying it can never succeed."""
    rt = make_runtime(TIMERS)
    rt.platform.start("approval", {}, id="ok-1")
    purge(aws)
    event = wake_event(body, wake("ok-1"), arn=aws.wake_arn)
    answer = worker.handler(event, FakeContext())
    assert rt.platform.get("ok-1").status == "awaiting"
    assert answer == {"batchItemFailures": []}


def test_wake_for_a_run_that_does_not_exist_is_dropped(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld
) -> None:
    make_runtime(TIMERS)
    answer = worker.handler(wake_event(wake("nobody"), arn=aws.wake_arn), FakeContext())
    assert answer == {"batchItemFailures": []}
    assert queued(aws.wake_queue) == []


def test_repeated_wake_for_an_ended_run_is_harmless(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld
) -> None:
    """SQS delivers at least once: a wake for a completed run changes nothing."""
    rt = make_runtime(TIMERS)
    rt.platform.start("approval", {}, id="appr-2")
    run_due(aws, rt.clock.now(), worker.handler)
    assert rt.platform.signal("appr-2", "approved", {"by": "ada"})
    run_due(aws, rt.clock.now(), worker.handler)
    assert rt.platform.get("appr-2").status == "completed"
    journal = rt.platform.journal("appr-2")
    for _ in range(2):
        answer = worker.handler(wake_event(wake("appr-2"), arn=aws.wake_arn), FakeContext())
        assert answer == {"batchItemFailures": []}
    assert rt.platform.journal("appr-2") == journal
    assert rt.platform.get("appr-2").result == {"approved": True, "by": "ada"}


def test_run_that_returns_right_after_consuming_a_signal_completes(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld
) -> None:
    """SPEC 3: a wait "consumes the earliest unconsumed signal of its name; the consumption is
    journaled" — also when the function returns straight after the wait."""
    rt = make_runtime(TIMERS)
    rt.platform.start("approval-direct", {}, id="direct-1")
    run_due(aws, rt.clock.now(), worker.handler)
    assert rt.platform.get("direct-1").status == "awaiting"
    assert rt.platform.signal("direct-1", "approved", {"by": "ada"})
    got = deliver(aws.sqs, aws.wake_url, aws.wake_arn, worker.handler)
    assert got is not None and got[1] == {"batchItemFailures": []}
    run = rt.platform.get("direct-1")
    assert run.status == "completed"
    assert run.result == {"approved": True, "by": "ada"}


def test_wake_for_a_run_another_invocation_holds_comes_back_after_a_delay(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld
) -> None:
    """One invocation advances a run at a time: a wake for a leased run is not an error; it
    is sent again after a delay past the time a dead holder is found out (tests/aws/
    test_long_steps.py has the rest: it waits, its holder prompts it)."""
    rt = make_runtime(TIMERS)
    rt.platform.start("approval", {}, id="held")
    purge(aws)
    assert rt.store.acquire_lease("held", "another-invocation", now_ms(rt.clock), 60_000) == "ok"
    answer = worker.handler(wake_event(wake("held"), arn=aws.wake_arn), FakeContext())
    assert answer == {"batchItemFailures": []}
    assert rt.platform.get("held").status == "running"
    assert len(rt.platform.journal("held")) == 1
    again = queued(aws.wake_queue)
    assert [(m.data, m.delay_s) for m in again] == [
        ({"run_id": "held", "reason": "busy", "tries": 1}, BUSY_FIRST_S)
    ]


# --- the Lambda deadline ------------------------------------------------------------------


def parts_done(rt: AwsRuntime, run_id: str) -> list[str]:
    return [e.name or "" for e in rt.platform.journal(run_id) if e.kind == Kind.STEP_RESULT]


def test_worker_out_of_time_stops_before_new_work_and_wakes_the_run_again(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld
) -> None:
    """Issue: "A run with more work than one invocation's time continues in a fresh invocation
    before the Lambda deadline." With less time left than the safety margin, the worker
    starts no step: the run stays running and a wake message is sent; the next invocation
    (here in a fresh container) finishes it."""
    rt = make_runtime(LONG)
    rt.platform.start("long", {"steps": 2, "spin": 0}, id="long-0")
    purge(aws)
    short = FakeContext(remaining_ms=int(SAFETY_S * 1000) - 1)
    answer = worker.handler(wake_event(wake("long-0"), arn=aws.wake_arn), short)
    assert answer == {"batchItemFailures": []}
    assert rt.platform.get("long-0").status == "running"
    assert parts_done(rt, "long-0") == []
    assert [m.data for m in queued(aws.wake_queue)] == [{"run_id": "long-0", "reason": "wake"}]

    fresh = make_runtime(LONG, clock=FakeClock(rt.clock.now()))
    got = deliver(aws.sqs, aws.wake_url, aws.wake_arn, worker.handler)
    assert got is not None and got[1] == {"batchItemFailures": []}
    assert fresh.platform.get("long-0").status == "completed"
    assert parts_done(fresh, "long-0") == ["part-1", "part-2"]


def test_warm_container_continues_the_run_it_stopped_for_the_deadline(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld
) -> None:
    """The wake message after a deadline stop may well reach the same warm container: its
    next invocation finishes the run, without failing the record."""
    rt = make_runtime(LONG)
    rt.platform.start("long", {"steps": 2, "spin": 0}, id="long-w")
    purge(aws)
    short = FakeContext(remaining_ms=int(SAFETY_S * 1000) - 1)
    assert worker.handler(wake_event(wake("long-w"), arn=aws.wake_arn), short) == {"batchItemFailures": []}
    assert rt.platform.get("long-w").status == "running"
    got = deliver(aws.sqs, aws.wake_url, aws.wake_arn, worker.handler)
    assert got is not None and got[1] == {"batchItemFailures": []}
    assert rt.platform.get("long-w").status == "completed"
    assert parts_done(rt, "long-w") == ["part-1", "part-2"]


def test_run_longer_than_an_invocation_continues_in_a_fresh_container(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld
) -> None:
    """The first invocation, with a deadline that falls inside the first step, finishes that
    step, saves it and stops; a fresh container (cold: it replays the journal) finishes the
    run without running the first step again."""
    rt = make_runtime(LONG)
    # The first step spins longer than the time left past the safety margin, so the
    # deadline falls inside it however fast the machine; that time leaves seconds for the
    # lease, the load and the Lua state before it (200 ms did not, on a loaded machine).
    rt.platform.start("long", {"steps": 2, "spin": 0, "spin_first": 2.2}, id="long-1")
    purge(aws)
    tight = FakeContext(remaining_ms=int(SAFETY_S * 1000) + 2000)
    answer = worker.handler(wake_event(wake("long-1"), arn=aws.wake_arn), tight)
    assert answer == {"batchItemFailures": []}
    assert rt.platform.get("long-1").status == "running"
    assert parts_done(rt, "long-1") == ["part-1"]
    assert [m.data for m in queued(aws.wake_queue)] == [{"run_id": "long-1", "reason": "wake"}]
    ran_first = [r for r in rt.platform.logs if r["message"] == "part ran"]
    assert [r["fields"]["part"] for r in ran_first] == [1]

    fresh = make_runtime(LONG, clock=FakeClock(rt.clock.now()))
    assert fresh is not rt and container.runtime() is fresh
    got = deliver(aws.sqs, aws.wake_url, aws.wake_arn, worker.handler)
    assert got is not None and got[1] == {"batchItemFailures": []}
    run = fresh.platform.get("long-1")
    assert run.status == "completed" and run.result == {"parts": 2}
    assert parts_done(fresh, "long-1") == ["part-1", "part-2"]
    ran_second = [r for r in fresh.platform.logs if r["message"] == "part ran" and not r.get("replayed")]
    assert [r["fields"]["part"] for r in ran_second] == [2]


# --- reconcile ----------------------------------------------------------------------------


def test_reconcile_event_resends_wakes_that_waited_too_long(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld
) -> None:
    """A wake message lost between the store write and the send (or by SQS) is re-sent by the
    reconciler the scheduled rule invokes; the run then advances."""
    clock = FakeClock()
    rt = make_runtime(TIMERS, clock=clock)
    rt.platform.start("approval", {}, id="lost-1")
    purge(aws)  # the wake message is lost
    assert worker.handler({"lunaflow": "reconcile"}, FakeContext()) == {
        "rewoken": [],
        "stuck": [],
    }  # not yet stale
    clock.advance(61)
    assert worker.handler({"lunaflow": "reconcile"}, FakeContext()) == {"rewoken": ["lost-1"], "stuck": []}
    run_due(aws, clock.now(), worker.handler)
    assert rt.platform.get("lost-1").status == "awaiting"
    assert worker.handler({"lunaflow": "reconcile"}, FakeContext()) == {"rewoken": [], "stuck": []}


def test_worker_record_built_from_a_received_message_matches_the_fixture_shape(aws: AwsWorld) -> None:
    """The events the helpers build from moto's messages have the fields of the real one."""
    aws.sqs.send_message(QueueUrl=aws.wake_url, MessageBody=wake("x"))
    got = receive(aws.sqs, aws.wake_url)
    record = sqs_record(got[0], aws.wake_arn)
    fixture = load_event("sqs_wake.json")["Records"][0]
    assert set(record) == set(fixture)
    assert set(fixture["attributes"]) <= set(record["attributes"])
    assert record["attributes"]["ApproximateReceiveCount"] == "1"

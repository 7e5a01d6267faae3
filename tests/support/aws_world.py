"""Deliver what AWS would deliver, at a fake time.

moto never fires EventBridge Scheduler schedules, and it holds SQS per-message delays on
real time. These helpers stand in for both, reading moto's state at the tests' fake clock:

- ``fire_due_schedules`` reads the group's schedules through the Scheduler API, and for each
  ``at(...)`` expression due at the fake time sends the schedule's ``Target.Input`` to its
  target queue, then deletes the schedule when its ``ActionAfterCompletion`` is ``DELETE``
  (as Scheduler does after a one-time schedule runs).
- ``release_due_delays`` lets go of delayed wake messages whose body's ``due_ms`` has come at
  the fake time (messages without ``due_ms`` — plain wakes sent with a delay — are released
  at once), through moto's SQS backend.
- ``deliver`` / ``drain`` play Lambda's SQS event source mapping: receive a batch, call the
  handler with a real-shaped event, delete what succeeded, and make the reported
  ``batchItemFailures`` visible again (as their visibility timeout would).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from moto.sqs.models import sqs_backends

from runtime.core.clock import now_ms as clock_ms

ACCOUNT = "123456789012"  # moto's default account
REGION = "eu-west-1"

_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")


@dataclass
class FakeContext:
    """A Lambda context: what Powertools reads, and the time left before the deadline."""

    remaining_ms: int = 900_000
    function_name: str = "lunaflow-worker"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:lunaflow-worker"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@dataclass
class AwsWorld:
    """The moto resources a test runs against (built by tests/aws/conftest.py)."""

    dynamodb: Any
    sqs: Any
    scheduler: Any
    secretsmanager: Any
    table: str
    wake_queue: str  # queue name
    wake_url: str
    wake_arn: str
    group: str
    role_arn: str
    user_queues: dict[str, tuple[str, str, str]]  # lunaflow name -> (physical name, url, arn)
    env: dict[str, str]


# --- Scheduler --------------------------------------------------------------------------


def at_seconds(expression: str) -> float:
    """Epoch seconds of a one-time ``at(yyyy-mm-ddThh:mm:ss)`` expression (UTC)."""
    match = _AT.match(expression)
    if match is None:
        raise AssertionError(f"not a one-time schedule expression: {expression!r}")
    return datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()


def schedules(scheduler: Any, group: str) -> list[dict[str, Any]]:
    """Every schedule of the group, in full (GetSchedule), through the Scheduler API."""
    out = []
    token = None
    while True:
        page = scheduler.list_schedules(GroupName=group, **({"NextToken": token} if token else {}))
        for summary in page.get("Schedules", []):
            out.append(scheduler.get_schedule(Name=summary["Name"], GroupName=group))
        token = page.get("NextToken")
        if not token:
            return out


def queue_url_of(sqs: Any, arn: str) -> str:
    return str(sqs.get_queue_url(QueueName=arn.rsplit(":", 1)[-1])["QueueUrl"])


def fire_due_schedules(scheduler: Any, sqs: Any, group: str, now_s: float) -> list[dict[str, Any]]:
    """Fire the group's one-time schedules due at ``now_s``: their Input goes to their target
    queue; ``ActionAfterCompletion=DELETE`` removes them. Returns the schedules fired."""
    fired = []
    for schedule in schedules(scheduler, group):
        if schedule.get("State", "ENABLED") != "ENABLED":
            continue
        if at_seconds(schedule["ScheduleExpression"]) > now_s:
            continue
        target = schedule["Target"]
        sqs.send_message(QueueUrl=queue_url_of(sqs, target["Arn"]), MessageBody=target["Input"])
        if schedule.get("ActionAfterCompletion") == "DELETE":
            scheduler.delete_schedule(Name=schedule["Name"], GroupName=group)
        fired.append(schedule)
    return fired


# --- SQS delays (through moto's backend) -------------------------------------------------


@dataclass(frozen=True)
class Held:
    body: str
    delay_s: int  # the DelaySeconds the message was sent with
    delayed: bool  # still held back by its delay (on moto's real-time clock)

    @property
    def data(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


def _queue(name: str) -> Any:
    return sqs_backends[ACCOUNT][REGION].queues[name]


def queued(queue_name: str) -> list[Held]:
    """Every message in the queue (delayed, visible or in flight), with its delay."""
    out = []
    for m in _queue(queue_name)._messages:
        delay = 0 if not m.delayed_until else round((m.delayed_until - m.sent_timestamp) / 1000)
        out.append(Held(m.body, max(0, delay), m.delayed))
    return out


def release_due_delays(queue_name: str, now_ms: int) -> int:
    """Release delayed messages due at the fake time ``now_ms``; returns how many."""
    released = 0
    for m in _queue(queue_name)._messages:
        if not m.delayed:
            continue
        try:
            body = json.loads(m.body)
        except ValueError:
            body = None
        due = body.get("due_ms") if isinstance(body, dict) else None
        if due is None or due <= now_ms:
            m.delayed_until = 0.0
            released += 1
    return released


# --- Lambda's SQS event source mapping ----------------------------------------------------


def sqs_record(message: dict[str, Any], arn: str) -> dict[str, Any]:
    """One record of a Lambda SQS event, from a ReceiveMessage message."""
    attributes = dict(message.get("Attributes", {}))
    attributes.setdefault("ApproximateReceiveCount", "1")
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": attributes,
        "messageAttributes": {},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": REGION,
    }


def receive(sqs: Any, url: str, max_messages: int = 10) -> list[dict[str, Any]]:
    got = sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=max_messages,
        MessageSystemAttributeNames=["All"],
        VisibilityTimeout=30,
    )
    return list(got.get("Messages", []))


def deliver(
    sqs: Any,
    url: str,
    arn: str,
    handler: Callable[[dict[str, Any], Any], Any],
    *,
    context: FakeContext | None = None,
    max_messages: int = 10,
) -> tuple[list[dict[str, Any]], Any] | None:
    """One batch: receive, call the handler, delete what succeeded, make failures visible
    again. Returns (the messages, the handler's answer), or None when nothing was visible."""
    messages = receive(sqs, url, max_messages)
    if not messages:
        return None
    event = {"Records": [sqs_record(m, arn) for m in messages]}
    try:
        answer = handler(event, context or FakeContext())
        failed = {f["itemIdentifier"] for f in (answer or {}).get("batchItemFailures", [])}
    except BatchProcessingError as e:  # every record failed: Lambda retries the whole batch
        answer, failed = e, {m["MessageId"] for m in messages}
    for m in messages:
        if m["MessageId"] in failed:
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
        else:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return messages, answer


def drain(
    sqs: Any,
    url: str,
    arn: str,
    handler: Callable[[dict[str, Any], Any], Any],
    *,
    context: FakeContext | None = None,
    max_batches: int = 50,
) -> int:
    """Deliver batches until the queue has nothing visible; returns the messages delivered."""
    count = 0
    for _ in range(max_batches):
        got = deliver(sqs, url, arn, handler, context=context)
        if got is None:
            return count
        count += len(got[0])
    raise AssertionError(f"the queue {url} did not drain in {max_batches} batches")


def run_due(world: AwsWorld, now_s: float, worker: Callable[[dict[str, Any], Any], Any]) -> int:
    """Everything AWS would do by ``now_s`` on the wake path: fire due schedules, release due
    delays, and run the worker until the wake queue is empty. Returns messages delivered."""
    total = 0
    for _ in range(50):
        fired = fire_due_schedules(world.scheduler, world.sqs, world.group, now_s)
        released = release_due_delays(world.wake_queue, int(round(now_s * 1000)))
        delivered = drain(world.sqs, world.wake_url, world.wake_arn, worker)
        total += delivered
        if not fired and not released and not delivered:
            return total
    raise AssertionError("the wake path did not settle")


def lose_every_wake(p: Any) -> None:
    """Take every visible wake message off an ``AwsPlatform``'s queue unprocessed (SQS lost
    them)."""
    sqs, url = p.clients.sqs, p.config.wake_queue_url
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        for m in got:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def later(p: Any, seconds: float) -> None:
    """Move an ``AwsPlatform``'s fake clock without delivering anything (the queue is lost
    or stuck)."""
    p._move_clock(clock_ms(p._clock) + int(seconds * 1000))

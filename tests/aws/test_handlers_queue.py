"""functions/queue.py: user queues (SQS) to the project's ``on "queue"`` handlers. A handler
error fails that message alone (batchItemFailures); a message's attempts come from SQS's
ApproximateReceiveCount."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from functions import fetch, queue
from runtime.aws.runtime import AwsRuntime
from tests.support.aws_events import PROJECTS, http_event, load_event
from tests.support.aws_world import AwsWorld, FakeContext, deliver, queued

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")

QUEUE_PROJECT = PROJECTS / "aws_queue"


def seen(rt: AwsRuntime) -> list[dict[str, Any]]:
    """What the orders handler was called with, in order (its log lines)."""
    return [r["fields"] for r in rt.platform.logs if r["message"] == "order"]


def orders(aws: AwsWorld) -> tuple[str, str, str]:
    return aws.user_queues["orders"]


def fixture_event(aws: AwsWorld) -> dict[str, Any]:
    event = load_event("sqs_user_queue.json")
    assert all(r["eventSourceARN"] == orders(aws)[2] for r in event["Records"])
    return event


def test_user_queue_event_calls_the_handler_with_id_body_and_attempts(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld
) -> None:
    """`on "queue" ("name", function(message) ... end)`: the message carries its id, its
    JSON body decoded, and its attempts (tests/events/sqs_user_queue.json)."""
    rt = make_runtime(QUEUE_PROJECT)
    event = fixture_event(aws)
    event["Records"] = event["Records"][:1]
    answer = queue.handler(event, FakeContext(function_name="lunaflow-queue"))
    assert answer == {"batchItemFailures": []}
    assert seen(rt) == [
        {"id": event["Records"][0]["messageId"], "body": {"order": "o-1", "qty": 2}, "attempts": 1}
    ]


def test_handler_error_fails_only_that_record(make_runtime: Callable[..., AwsRuntime], aws: AwsWorld) -> None:
    """SPEC 2: "an error retries the message" — that message alone: the batch answer lists it
    in batchItemFailures, the other record succeeded."""
    rt = make_runtime(QUEUE_PROJECT)
    event = fixture_event(aws)
    answer = queue.handler(event, FakeContext(function_name="lunaflow-queue"))
    bad = event["Records"][1]["messageId"]
    assert answer == {"batchItemFailures": [{"itemIdentifier": bad}]}
    assert [m["body"]["order"] for m in seen(rt)] == ["o-1", "o-2"]


def test_attempts_come_from_approximate_receive_count(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld
) -> None:
    """The fixture's second record is on its third receive: the handler sees attempts = 3."""
    rt = make_runtime(QUEUE_PROJECT)
    event = fixture_event(aws)
    queue.handler(event, FakeContext(function_name="lunaflow-queue"))
    assert [m["attempts"] for m in seen(rt)] == [1, 3]


def test_failed_message_is_retried_by_sqs_with_a_higher_attempt(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld
) -> None:
    """Through moto: a message whose handler fails on attempts 1 and 2 goes back to the queue,
    comes back with ApproximateReceiveCount 2 then 3, and succeeds on attempt 3; a good
    message in the same first batch is handled once."""
    rt = make_runtime(QUEUE_PROJECT)
    _, url, arn = orders(aws)
    aws.sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"order": "slow", "until_attempt": 3}))
    aws.sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"order": "quick"}))
    answers = []
    for _ in range(5):
        got = deliver(aws.sqs, url, arn, queue.handler, context=FakeContext(function_name="lunaflow-queue"))
        if got is None:
            break
        answers.append(got[1])
    attempts = [(m["body"]["order"], m["attempts"]) for m in seen(rt)]
    assert sorted(attempts) == [("quick", 1), ("slow", 1), ("slow", 2), ("slow", 3)]
    assert queued(orders(aws)[0]) == []
    first = answers[0]
    assert isinstance(first, dict) and len(first["batchItemFailures"]) == 1


def test_queue_name_is_found_from_the_event_source_arn(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld
) -> None:
    """The stack names the SQS queue ("lunaflow-orders"); the handler is the project's
    `on "queue" ("orders", ...)`, found through LUNAFLOW_QUEUE_URLS."""
    rt = make_runtime(QUEUE_PROJECT)
    physical, _, arn = orders(aws)
    assert physical != "orders" and arn.endswith(":" + physical)
    event = fixture_event(aws)
    event["Records"] = event["Records"][:1]
    assert queue.handler(event, FakeContext()) == {"batchItemFailures": []}
    assert len(seen(rt)) == 1


def test_record_from_a_queue_without_a_handler_fails(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld
) -> None:
    """A message no handler can take is not silently deleted: it fails (and after the queue's
    receive count, lands in the dead-letter queue)."""
    rt = make_runtime(QUEUE_PROJECT)
    event = fixture_event(aws)
    stray = copy.deepcopy(event["Records"][0])
    stray["messageId"] = "11111111-2222-4333-8444-555555555555"
    stray["eventSourceARN"] = stray["eventSourceARN"].replace("lunaflow-orders", "somebody-else")
    event["Records"] = [event["Records"][0], stray]
    answer = queue.handler(event, FakeContext())
    assert answer == {"batchItemFailures": [{"itemIdentifier": stray["messageId"]}]}
    assert len(seen(rt)) == 1


def test_message_sent_from_a_handler_reaches_the_queue_handler(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld
) -> None:
    """`queue "orders":send(body)` on AWS sends to the stack's SQS queue; SQS brings it back
    to the queue Lambda, whose handler gets the same body."""
    rt = make_runtime(QUEUE_PROJECT)
    answer = fetch.handler(http_event("POST", "/send", json.dumps({"order": "o-9", "qty": 1})), FakeContext())
    assert answer["statusCode"] == 202
    sent_id = json.loads(answer["body"])["sent"]
    _, url, arn = orders(aws)
    got = deliver(aws.sqs, url, arn, queue.handler)
    assert got is not None and got[1] == {"batchItemFailures": []}
    assert seen(rt) == [{"id": sent_id, "body": {"order": "o-9", "qty": 1}, "attempts": 1}]

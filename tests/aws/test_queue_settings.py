"""Per-queue `attempts` and `retry_delay` from lunaflow.toml on AWS, through the queue Lambda
on moto; and a malformed message, logged with why it was dropped.

Issue 20.4: "With `attempts = 1` the template still sets `maxReceiveCount` 5 and a 360 s
visibility timeout, and the queue function runs the handler on every delivery: a
non-idempotent handler (an e-mail, a charge) runs up to 5 times. The stack takes each
queue's settings (`maxReceiveCount`, visibility or `ChangeMessageVisibility` for the
delay), and the handler honours the receive count; a malformed message is logged with why
it was dropped."

The fixture's `orders` queue redrives after 3 receives (tests/aws/conftest.py), a looser
policy than the project's: the handler itself must keep to the project's attempts. Messages
are delivered here as Lambda's event source mapping does, without touching the visibility of
a failed one (the handler sets it).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

import functions._runtime as container
from functions import queue
from runtime.aws.runtime import AwsRuntime
from tests.support.aws_world import ACCOUNT, REGION, AwsWorld, FakeContext, receive, sqs_record

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")

HANDLER = """
local seen = kv "seen"
on "queue" ("orders", function(message)
    log.info("order", { attempts = message.attempts })
    -- kv counts every run of the handler (an e-mail sent, a card charged)
    seen:put(message.body.order, (seen:get(message.body.order) or 0) + 1)
    if message.body.bad then error("order " .. message.body.order .. " is bad", 0) end
end)
"""


def project(tmp_path: Path, settings: str) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "main.lua").write_text(HANDLER, encoding="utf-8")
    (root / "lunaflow.toml").write_text(f'name = "qs"\n\n[queues.orders]\n{settings}\n', encoding="utf-8")
    return root


@pytest.fixture
def lines() -> Iterator[list[logging.LogRecord]]:
    got: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            got.append(record)

    handler = Keep(level=logging.DEBUG)
    base = container.logger._logger
    base.addHandler(handler)
    yield got
    base.removeHandler(handler)


def orders(aws: AwsWorld) -> tuple[str, str, str]:
    return aws.user_queues["orders"]


def send(aws: AwsWorld, body: str) -> None:
    aws.sqs.send_message(QueueUrl=orders(aws)[1], MessageBody=body)


def deliver(aws: AwsWorld) -> tuple[list[dict[str, Any]], Any] | None:
    """One batch as Lambda delivers it: delete what succeeded, leave failures as the handler
    left them (their visibility is the handler's to set)."""
    _, url, arn = orders(aws)
    messages = receive(aws.sqs, url)
    if not messages:
        return None
    event = {"Records": [sqs_record(m, arn) for m in messages]}
    try:
        answer: Any = queue.handler(event, FakeContext(function_name="lunaflow-queue"))
        failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
    except BatchProcessingError as e:  # every record failed: Lambda retries the whole batch
        answer = {"batchItemFailures": [{"itemIdentifier": m["MessageId"]} for m in messages]}
        assert len(e.child_exceptions) == len(messages)
        failed = {m["MessageId"] for m in messages}
    for m in messages:
        if m["MessageId"] not in failed:
            aws.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return messages, answer


def held(aws: AwsWorld) -> list[Any]:
    """The orders queue's messages in moto, with their visibility."""
    from moto.sqs.models import sqs_backends

    return list(sqs_backends[ACCOUNT][REGION].queues[orders(aws)[0]]._messages)


def dead_letters(aws: AwsWorld) -> list[str]:
    url = aws.sqs.get_queue_url(QueueName=orders(aws)[0] + "-dlq")["QueueUrl"]
    return [m["Body"] for m in receive(aws.sqs, url)]


def runs_of(rt: AwsRuntime, order: str) -> int:
    got = rt.platform.services.call("kv", "seen", "get", [order])  # type: ignore[union-attr]
    return int(got[0] or 0)


def test_attempts_1_runs_the_handler_once_however_often_sqs_delivers(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld, tmp_path: Path, lines: list[logging.LogRecord]
) -> None:
    """`attempts = 1`: the handler runs on the first delivery only; later deliveries (the
    queue's own redrive allows 3) do not run it, and the message ends in the dead-letter queue."""
    rt = make_runtime(project(tmp_path, 'attempts = 1\nretry_delay = "45s"'))
    send(aws, json.dumps({"order": "o-1", "bad": True}))
    receives = 0
    for _ in range(10):  # bounded: moto's redrive moves it after 3 receives
        got = deliver(aws)
        if got is None:
            break
        receives += 1
        assert got[1] == {"batchItemFailures": [{"itemIdentifier": got[0][0]["MessageId"]}]}
        for message in held(aws):  # its visibility timeout passes
            message.visible_at = 0
    assert runs_of(rt, "o-1") == 1
    assert receives == 3
    skipped = [r for r in lines if r.getMessage() == "queue message not run again"]
    assert [r.why for r in skipped] == [
        f"it was received {n} times, past the queue's 1 attempts; the handler is not run again and "
        "the message waits for the dead-letter queue"
        for n in (2, 3)
    ]
    assert [json.loads(b)["order"] for b in dead_letters(aws)] == ["o-1"]


def test_a_failed_attempt_comes_back_after_the_queues_retry_delay(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld, tmp_path: Path
) -> None:
    """`retry_delay = "45s"`: a failed message is hidden for 45 s (ChangeMessageVisibility),
    not for the queue's visibility timeout."""
    make_runtime(project(tmp_path, 'attempts = 3\nretry_delay = "45s"'))
    send(aws, json.dumps({"order": "o-2", "bad": True}))
    before = time.time()
    got = deliver(aws)
    assert got is not None and got[1]["batchItemFailures"]
    (message,) = held(aws)
    hidden_s = message.visible_at / 1000 - before
    assert 43 <= hidden_s <= 47, hidden_s


def test_the_last_attempt_goes_to_the_dead_letter_queue_at_once(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld, tmp_path: Path
) -> None:
    """`attempts = 2`: the second failure is the last; the message is not held back for the
    retry delay but made visible, so the redrive moves it on."""
    rt = make_runtime(project(tmp_path, 'attempts = 2\nretry_delay = "1h"'))
    send(aws, json.dumps({"order": "o-3", "bad": True}))
    assert deliver(aws) is not None
    (message,) = held(aws)
    assert message.visible_at / 1000 - time.time() > 3000  # the 1h retry delay
    message.visible_at = 0  # the hour passes
    assert deliver(aws) is not None
    (message,) = held(aws)
    assert message.visible  # no delay after the last attempt
    assert runs_of(rt, "o-3") == 2


def test_a_malformed_message_is_dropped_and_logged_with_why(
    make_runtime: Callable[..., AwsRuntime],
    aws: AwsWorld,
    tmp_path: Path,
    lines: list[logging.LogRecord],
) -> None:
    """A body that is not JSON (queue:send always sends JSON) is not retried into the
    dead-letter queue as a handler failure: it is dropped, with a warning saying why."""
    make_runtime(project(tmp_path, "attempts = 3"))
    send(aws, "{not json")
    got = deliver(aws)
    assert got is not None and got[1] == {"batchItemFailures": []}
    assert held(aws) == []
    (line,) = [r for r in lines if r.getMessage() == "queue message dropped"]
    assert line.levelno == logging.WARNING
    assert line.queue == "orders"
    assert line.message_id == got[0][0]["MessageId"]
    assert "not JSON" in line.why
    assert line.body == "{not json"

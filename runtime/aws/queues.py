"""One SQS record of a user queue through its ``on "queue"`` handler, keeping the queue's
``attempts`` and ``retry_delay`` from lunaflow.toml, as ``lunaflow dev`` does.

SQS counts receives (``ApproximateReceiveCount``), which is the message's attempt. The stack
sets each queue's ``maxReceiveCount`` to its attempts, so SQS moves a spent message to the
dead-letter queue; the handler keeps the count too, so a looser redrive (a queue made by
hand, a stack not yet deployed) never runs a non-idempotent handler more often than the
project says. A failed attempt is hidden for the retry delay with ``ChangeMessageVisibility``
(the visibility timeout must stay longer than the function's timeout); the last one is made
visible at once, so the redrive moves it on.
"""

from __future__ import annotations

import enum
import json
import logging
import math
from dataclasses import dataclass

from botocore.exceptions import ClientError

from runtime.aws.runtime import AwsRuntime

log = logging.getLogger("lunaflow.aws")


class Verdict(enum.Enum):
    DONE = "done"  # the handler ran and returned: delete the message
    DROPPED = "dropped"  # the message cannot be delivered: log why and delete it
    RETRY = "retry"  # the handler failed with attempts left: it comes back after the delay
    SPENT = "spent"  # the handler failed its last attempt: leave it for the dead-letter queue
    PAST_ATTEMPTS = "past attempts"  # delivered again after its last attempt: not run, left for the DLQ


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    why: str = ""  # the handler's error, or why the message was dropped or not run


@dataclass(frozen=True)
class QueueRecord:
    queue: str  # the lunaflow queue name
    message_id: str
    body: str
    receive_count: int
    receipt_handle: str


def deliver(rt: AwsRuntime, record: QueueRecord) -> Outcome:
    try:
        body = json.loads(record.body)
    except ValueError as e:
        return Outcome(
            Verdict.DROPPED,
            f"its body is not JSON ({e}); queue:send always sends JSON, so something else sent it",
        )
    settings = rt.platform.source.queue_settings(record.queue)
    if record.receive_count > settings.attempts:
        _hide(rt, record, 0)
        return Outcome(
            Verdict.PAST_ATTEMPTS,
            f"it was received {record.receive_count} times, past the queue's {settings.attempts} "
            "attempts; the handler is not run again and the message waits for the dead-letter queue",
        )
    message = {"id": record.message_id, "body": body, "attempts": record.receive_count}
    error = rt.deliver(record.queue, message)
    if error is None:
        return Outcome(Verdict.DONE)
    if record.receive_count >= settings.attempts:
        _hide(rt, record, 0)
        return Outcome(Verdict.SPENT, error)
    _hide(rt, record, math.ceil(settings.retry_delay_s))
    return Outcome(Verdict.RETRY, error)


def _hide(rt: AwsRuntime, record: QueueRecord, seconds: int) -> None:
    try:
        rt.aws_services.queues.hide(record.queue, record.receipt_handle, seconds)
    except ClientError as e:  # the message then keeps the queue's visibility timeout
        log.warning(
            "queue %s message %s: could not hide it for %ss: %s", record.queue, record.message_id, seconds, e
        )

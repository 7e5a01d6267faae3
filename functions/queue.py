"""User queues (SQS) -> the project's ``on "queue"`` handlers. A handler error fails that
message alone; it comes back after the queue's retry delay and, after its attempts (both
from lunaflow.toml), goes to its dead-letter queue (``runtime.aws.queues``)."""

from __future__ import annotations

import traceback
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from functions._batch import partial_response
from functions._runtime import logger, metrics, runtime, tracer
from runtime.aws.queues import QueueRecord, Verdict, deliver

BODY_SHOWN = 200  # characters of a dropped message's body in its log line


class HandlerFailed(Exception):
    pass


def queue_name(record: dict[str, Any]) -> str:
    """The lunaflow queue a record came from: the configured URL whose name ends the ARN."""
    physical = str(record["eventSourceARN"]).rsplit(":", 1)[-1]
    for name, url in runtime().config.queue_urls.items():
        if url.rstrip("/").rsplit("/", 1)[-1] == physical:
            return name
    return physical


def _record(record: dict[str, Any]) -> None:
    queue = queue_name(record)
    message_id, body = str(record["messageId"]), str(record.get("body", ""))
    rt = runtime()
    try:
        outcome = deliver(
            rt,
            QueueRecord(
                queue=queue,
                message_id=message_id,
                body=body,
                receive_count=int(record.get("attributes", {}).get("ApproximateReceiveCount") or 1),
                receipt_handle=str(record["receiptHandle"]),
            ),
        )
    except Exception as e:
        # ``deliver`` answers a handler's failure with an outcome: this is the platform's own
        # error. It is logged as one (the harness raises it from the call that settled it),
        # never taken for a retry, and the message is left to SQS's redelivery.
        text = f"queue {queue} message {message_id}: delivering it failed: {e}"
        rt.log_error(text, traceback.format_exc(), queue=queue, message_id=message_id)
        logger.exception("queue delivery failed", extra={"queue": queue, "message_id": message_id})
        raise
    if outcome.verdict is Verdict.DROPPED:
        logger.warning(
            "queue message dropped",
            extra={
                "queue": queue,
                "message_id": message_id,
                "why": outcome.why,
                "body": body[:BODY_SHOWN],
            },
        )
        return
    if outcome.verdict is Verdict.PAST_ATTEMPTS:
        logger.warning(
            "queue message not run again",
            extra={"queue": queue, "message_id": message_id, "why": outcome.why},
        )
    if outcome.verdict is not Verdict.DONE:
        raise HandlerFailed(f"queue {queue} message {message_id}: {outcome.why}")


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return partial_response(event, _record)

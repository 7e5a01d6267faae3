"""User queues (SQS) -> the project's ``on "queue"`` handlers. A handler error fails that
message alone; it comes back after the queue's retry delay and, after its attempts (both
from lunaflow.toml), goes to its dead-letter queue (``runtime.aws.queues``)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions._runtime import logger, metrics, runtime, tracer
from runtime.aws.queues import QueueRecord, Verdict, deliver

processor = BatchProcessor(event_type=EventType.SQS)

BODY_SHOWN = 200  # characters of a dropped message's body in its log line


class HandlerFailed(Exception):
    pass


def queue_name(record: SQSRecord) -> str:
    """The lunaflow queue a record came from: the configured URL whose name ends the ARN."""
    physical = record.event_source_arn.rsplit(":", 1)[-1]
    for name, url in runtime().config.queue_urls.items():
        if url.rstrip("/").rsplit("/", 1)[-1] == physical:
            return name
    return physical


def _record(record: SQSRecord) -> None:
    queue = queue_name(record)
    outcome = deliver(
        runtime(),
        QueueRecord(
            queue=queue,
            message_id=record.message_id,
            body=record.body,
            receive_count=int(record.attributes.approximate_receive_count or 1),
            receipt_handle=record.receipt_handle,
        ),
    )
    if outcome.verdict is Verdict.DROPPED:
        logger.warning(
            "queue message dropped",
            extra={
                "queue": queue,
                "message_id": record.message_id,
                "why": outcome.why,
                "body": record.body[:BODY_SHOWN],
            },
        )
        return
    if outcome.verdict is Verdict.PAST_ATTEMPTS:
        logger.warning(
            "queue message not run again",
            extra={"queue": queue, "message_id": record.message_id, "why": outcome.why},
        )
    if outcome.verdict is not Verdict.DONE:
        raise HandlerFailed(f"queue {queue} message {record.message_id}: {outcome.why}")


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(event=event, record_handler=_record, processor=processor, context=context)

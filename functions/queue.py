"""User queues (SQS) -> the project's ``on "queue"`` handlers. A handler error fails that
message alone; SQS retries it and, after the queue's receive count, moves it to its
dead-letter queue."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions._runtime import logger, metrics, runtime, tracer

processor = BatchProcessor(event_type=EventType.SQS)


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
    message = {
        "id": record.message_id,
        "body": json.loads(record.body),
        "attempts": int(record.attributes.approximate_receive_count or 1),
    }
    error = runtime().deliver(queue, message)
    if error is not None:
        raise HandlerFailed(f"queue {queue} message {record.message_id}: {error}")


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(event=event, record_handler=_record, processor=processor, context=context)

"""API Gateway HTTP API (payload format 2.0) -> the project's ``on "fetch"`` handler."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from functions._runtime import logger, metrics, runtime, tracer
from runtime.aws.http import BadRequest, request_from_event, response_to_event


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        request = request_from_event(event)
    except BadRequest as e:
        return response_to_event(e.response)
    response, failure = runtime().fetch(request, context.get_remaining_time_in_millis())
    if failure is not None:
        logger.error(
            "fetch handler failed",
            extra={
                "request_id": failure.request_id,
                "error": failure.message,
                "traceback": failure.traceback,
            },
        )
    return response_to_event(response)

"""The wake queue (SQS) -> advance each run; an EventBridge rule's ``reconcile`` event ->
heal lost and failed wakes. Failures are reported per message (partial batch) and counted
in the ``WakeFailures`` metric, which an alarm watches."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from functions._batch import partial_response
from functions._runtime import logger, metrics, runtime, tracer
from runtime.aws.contract import RECONCILE_EVENT
from runtime.aws.observe import PowertoolsObserver
from runtime.errors import InvalidInput


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _record(record: dict[str, Any], context: LambdaContext) -> None:
    body = str(record.get("body", ""))
    try:
        message = json.loads(body)
    except json.JSONDecodeError:
        message = None
    if isinstance(message, dict) and "schedule" in message:  # a declared schedule's tick
        try:
            fired = runtime().tick(str(message["schedule"]), str(message.get("tick", "")))
        except InvalidInput as e:  # not a message Scheduler sends: retrying cannot help
            logger.warning("tick message refused and dropped: %s", e, extra={"body": body})
            return
        if fired is None:
            logger.warning("tick of a schedule this code does not declare dropped", extra={"body": body})
        return
    run_id = message.get("run_id") if isinstance(message, dict) else None
    if not isinstance(run_id, str) or not run_id:
        logger.warning("wake message without a run id dropped", extra={"body": body})
        return
    assert isinstance(message, dict)
    try:
        outcome = runtime().advance(
            run_id,
            remaining_ms=context.get_remaining_time_in_millis(),
            reason=str(message.get("reason", "wake")),
            due_ms=_whole(message.get("due_ms")),
            tries=_whole(message.get("tries")) or 0,
        )
    except Exception:
        PowertoolsObserver(logger, metrics).wake_failed(run_id)
        logger.exception("wake failed; SQS retries it and the reconciler heals it", extra={"run_id": run_id})
        raise
    logger.debug("advanced", extra={"run_id": run_id, "outcome": outcome, "reason": message.get("reason")})


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if event == RECONCILE_EVENT:
        return {"rewoken": runtime().reconcile()}
    return partial_response(event, lambda record: _record(record, context))

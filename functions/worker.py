"""The wake queue (SQS) -> advance each run; an EventBridge rule's ``reconcile`` event ->
heal lost and failed wakes. A batch's wakes advance at once (``LUNAFLOW_WAKE_THREADS``, a
Lua state each). Failures are reported per message (partial batch) and counted in the
``WakeFailures`` metric, which an alarm watches."""

from __future__ import annotations

import json
from contextlib import nullcontext
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
            trigger = message.get("trigger") is True
            fired = runtime().tick(str(message["schedule"]), str(message.get("tick", "")), trigger=trigger)
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
    wake(run_id, message, context)


def wake(run_id: str, message: dict[str, Any], context: LambdaContext, heals: str = "SQS retries it") -> None:
    """Advance the run a wake names (a message of the wake queue, or the runner's event);
    ``heals``: what brings a failed one back before the reconciler does."""
    rt = runtime()
    try:
        with rt.lend() if rt.config.wake_threads > 1 else nullcontext() as worker:
            outcome = rt.advance(
                run_id,
                remaining_ms=context.get_remaining_time_in_millis(),
                reason=str(message.get("reason", "wake")),
                due_ms=_whole(message.get("due_ms")),
                tries=_whole(message.get("tries")) or 0,
                worker=worker,
            )
    except Exception:
        PowertoolsObserver(logger, metrics).wake_failed(run_id)
        logger.exception(f"wake failed; {heals} and the reconciler heals it", extra={"run_id": run_id})
        raise
    logger.debug("advanced", extra={"run_id": run_id, "outcome": outcome, "reason": message.get("reason")})


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if event == RECONCILE_EVENT:
        rt = runtime()
        rewoken = rt.reconcile()
        if rt.stuck:  # runs that should have moved long ago: the StuckRuns alarm watches this
            PowertoolsObserver(logger, metrics).stuck_runs(rt.stuck)
        return {"rewoken": rewoken, "stuck": rt.stuck}
    # A batch's wakes advance at once, each on a Lua state of its own: runs woken together
    # (a map's branches) overlap within one invocation as they would across several.
    # One run's wakes (a parent woken by each branch's end) stay on one thread, in order.
    threads = runtime().config.wake_threads
    return partial_response(event, lambda record: _record(record, context), threads=threads, key=_run_of)


def _run_of(record: dict[str, Any]) -> str:
    """The run a wake message is for (a tick or an unreadable message: its own key)."""
    try:
        message = json.loads(str(record.get("body", "")))
    except json.JSONDecodeError:
        message = None
    run_id = message.get("run_id") if isinstance(message, dict) else None
    return f"run:{run_id}" if isinstance(run_id, str) else f"message:{record.get('messageId')}"

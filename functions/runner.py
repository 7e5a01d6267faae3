"""The runner: the fetch function's hand-offs -> advance the run. A request that began a run's
activation and met a step it does not run (one with no ``timeout``) invokes this function
asynchronously with the run's wake (``runtime.aws.wake.AwsWaker.hand_off``): one request,
where the wake queue's send, receive and delete are three. It is the worker's code on a
function of its own, so a burst of hand-offs is capped by its own reserved concurrency and
never takes the worker's from the wake queue's batches, the timers and the reconciler.

The reconcile rule sends it ``WARM_EVENT`` every minute, as it sends the worker its reconcile:
one container stays warm, so a hand-off at low traffic pays no cold start.

A failed activation is not retried here (the stack sets no retries): its wake-up, recorded
with the start or the signal, is the reconciler's to re-send through the wake queue, as a
lost message is."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from functions._runtime import logger, metrics, runtime, tracer
from functions.worker import wake
from runtime.aws.contract import WARM_EVENT


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if event == WARM_EVENT:
        runtime()
        return {"warm": True}
    run_id = event.get("run_id") if isinstance(event, dict) else None
    if not isinstance(run_id, str) or not run_id:
        logger.warning("hand-off without a run id dropped", extra={"event": event})
        return {"advanced": None}
    wake(run_id, event, context, heals="Lambda does not retry it (the runner has no retries)")
    return {"advanced": run_id}

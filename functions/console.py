"""CloudWatch custom widgets: the console's runs list and run page, rendered from DynamoDB.

The widget's params (``view``, ``run_id``, ``status``, ``workflow``, ``page``) and the JSON
of a clicked ``cwdb-action`` (``action``: resume or cancel) arrive as top-level event keys.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from functions._runtime import logger, metrics, runtime, tracer
from runtime.console import render
from runtime.errors import LunaflowError


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> str:
    runs = runtime().platform
    actions = render.CloudWatchActions(endpoint=context.invoked_function_arn)
    view = event.get("view", "runs")
    notice = None
    run_id = event.get("run_id")
    try:
        if event.get("action") in ("resume", "cancel") and isinstance(run_id, str):
            (runs.resume if event["action"] == "resume" else runs.cancel)(run_id)
            notice = f"{event['action']} done"
        if view == "run":
            if not isinstance(run_id, str) or not run_id:
                latest = runs.runs(status="failed")[:1] or runs.runs()[:1]
                if not latest:
                    return "<style>" + render.STYLE + "</style><div class='lf'><p>No runs yet.</p></div>"
                run_id = latest[0].id
            body = render.run_page(runs, actions, run_id, notice=notice)
        else:
            status = event.get("status") if event.get("status") in render.STATUSES else None
            page = int(event["page"]) if str(event.get("page", "")).isdigit() else 0
            body = render.runs_page(
                runs, actions, status_filter=status, workflow=event.get("workflow"), page=page
            )
    except LunaflowError as e:
        body = f"<div class='lf'><p class='err'>{render.e(e)}</p>{actions.list_link('all runs')}</div>"
    return "<style>" + render.STYLE + "</style>" + body

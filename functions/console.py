"""CloudWatch custom widgets: the console's runs list and run page, rendered from DynamoDB
by the one renderer the local page uses (runtime/console/widget.py says what a call shows
and does, and where a widget differs from the local page), with the deployed schedules'
pauses and triggers (runtime/aws/schedules.py).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from functions._runtime import logger, metrics, runtime, tracer
from runtime.aws.schedules import AwsSchedules
from runtime.console import render
from runtime.console.widget import widget_page


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> str:
    actions = render.CloudWatchActions(endpoint=context.invoked_function_arn)
    rt = runtime()
    schedules = AwsSchedules(rt.clients.scheduler, rt.clients.sqs, rt.config)
    return "<style>" + render.STYLE + "</style>" + widget_page(rt.platform, actions, event, schedules)

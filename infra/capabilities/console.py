"""The console on AWS: a CloudWatch dashboard whose custom widgets (rendered by the console
function) list runs and show one run's timeline, beside the runtime's metrics and a Logs
Insights query for one run's lines. The alarms are ``infra.capabilities.alarms``."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from runtime.aws.contract import NAMESPACE, SERVICE, Metric


def metric(name: Metric, statistic: str = "Sum") -> cw.Metric:
    return cw.Metric(
        namespace=NAMESPACE,
        metric_name=name,
        dimensions_map={"service": SERVICE},
        statistic=statistic,
        period=Duration.minutes(5),
    )


class Console(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        console: lambda_.IFunction,
        functions: dict[str, lambda_.Function],
    ) -> None:
        super().__init__(scope, id)
        self.dashboard = cw.Dashboard(
            self, "Dashboard", dashboard_name=f"{Stack.of(self).stack_name}-console"
        )
        self.runs_widget = cw.CustomWidget(
            function_arn=console.function_arn,
            title="Runs",
            params={"view": "runs"},
            width=12,
            height=12,
            update_on_refresh=True,
        )
        self.run_widget = cw.CustomWidget(
            function_arn=console.function_arn,
            title="Run",
            params={"view": "run"},
            width=12,
            height=12,
            update_on_refresh=True,
        )
        log_groups = [fn.log_group.log_group_name for fn in functions.values()]
        self.dashboard.add_widgets(self.runs_widget, self.run_widget)
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Runs",
                left=[metric(Metric.RUNS_STARTED), metric(Metric.RUNS_COMPLETED), metric(Metric.RUNS_FAILED)],
                width=8,
            ),
            cw.GraphWidget(
                title="Steps",
                left=[
                    metric(Metric.STEPS_SUCCEEDED),
                    metric(Metric.STEPS_FAILED),
                    metric(Metric.STEP_RETRIES),
                ],
                width=8,
            ),
            cw.GraphWidget(
                title="Failed wakes and stuck runs",
                left=[metric(Metric.WAKE_FAILURES), metric(Metric.STUCK_RUNS)],
                width=8,
            ),
            cw.GraphWidget(
                title="Signal to resume (ms)",
                left=[
                    metric(Metric.SIGNAL_TO_RESUME_LATENCY, "p50"),
                    metric(Metric.SIGNAL_TO_RESUME_LATENCY, "p99"),
                ],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cw.LogQueryWidget(
                title="One run's log lines (edit the run id)",
                log_group_names=log_groups,
                query_lines=[
                    "fields @timestamp, level, message, step",
                    'filter run_id = "RUN-ID"',
                    "sort @timestamp asc",
                ],
                width=24,
            )
        )

    @property
    def url(self) -> str:
        stack = Stack.of(self)
        return (
            f"https://{stack.region}.console.aws.amazon.com/cloudwatch/home?region={stack.region}"
            f"#dashboards/dashboard/{self.dashboard.dashboard_name}"
        )

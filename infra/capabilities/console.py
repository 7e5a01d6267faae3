"""The console on AWS: a CloudWatch dashboard whose custom widgets (rendered by the console
function) list runs and show one run's timeline, beside the runtime's metrics and a Logs
Insights query for one run's lines; and alarms on failed runs, dead letters and errors."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
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
        dead_letters: Mapping[str, sqs.IQueue],
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
                title="Failed wakes",
                left=[metric(Metric.WAKE_FAILURES)],
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
        self.alarms: list[cw.Alarm] = []
        self.alarms.append(
            metric(Metric.RUNS_FAILED).create_alarm(
                self,
                "FailedRuns",
                threshold=0,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                alarm_description="A run failed: a step ran out of attempts, code raised or replay diverged",
            )
        )
        self.alarms.append(
            metric(Metric.WAKE_FAILURES).create_alarm(
                self,
                "FailedWakes",
                threshold=0,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                alarm_description="The worker failed a wake (throttling, an error): SQS retries it and the "
                "reconciler heals it; many in a row point at a cause to fix",
            )
        )
        for name, dlq in dead_letters.items():
            self.alarms.append(
                dlq.metric_approximate_number_of_messages_visible(period=Duration.minutes(5)).create_alarm(
                    self,
                    f"DeadLetters{name}",
                    threshold=0,
                    comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    evaluation_periods=1,
                    treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                    alarm_description=f"Messages reached the dead-letter queue of {name}",
                )
            )
        for name, fn in functions.items():
            self.alarms.append(
                fn.metric_errors(period=Duration.minutes(5)).create_alarm(
                    self,
                    f"{name}Errors",
                    threshold=0,
                    comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    evaluation_periods=1,
                    treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                    alarm_description=f"The {name} function raised",
                )
            )

    @property
    def url(self) -> str:
        stack = Stack.of(self)
        return (
            f"https://{stack.region}.console.aws.amazon.com/cloudwatch/home?region={stack.region}"
            f"#dashboards/dashboard/{self.dashboard.dashboard_name}"
        )

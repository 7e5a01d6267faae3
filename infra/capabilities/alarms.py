"""The operator's alarms, every one with the alarm topic as its action (and an email
subscription when ``-c alarmEmail=`` is given): failed runs and wakes, stuck runs, function errors and
throttles, messages in any dead-letter queue, a wake queue that is not drained, and
DynamoDB throttling on the table and on each index."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.capabilities.console import metric
from runtime.aws.contract import Metric

PERIOD = Duration.minutes(5)
# A wake waits at most 15 minutes by design (SQS's longest delay: a near timer, a busy run's
# back-off); one older than twice that, three periods running, means the workers do not keep up.
WAKE_AGE_ALARM_S = 1800
WAKE_AGE_PERIODS = 3


class Alarms(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        functions: Mapping[str, lambda_.Function],
        dead_letters: Mapping[str, sqs.IQueue],
        wake_queue: sqs.IQueue,
        table: dynamodb.Table,
        indexes: list[str],
        email: str | None,
    ) -> None:
        super().__init__(scope, id)
        self.topic = sns.Topic(self, "Topic", display_name="lunaflow alarms", enforce_ssl=True)
        if email is not None:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        self.alarms: list[cw.Alarm] = []
        self._any(
            "FailedRuns",
            metric(Metric.RUNS_FAILED),
            "A run failed: a step ran out of attempts, code raised or replay diverged",
        )
        self._any(
            "FailedWakes",
            metric(Metric.WAKE_FAILURES),
            "The worker or the runner failed a wake (throttling, an error): SQS retries the worker's, "
            "and the reconciler heals both; many in a row point at a cause to fix",
        )
        self._any(
            "StuckRuns",
            metric(Metric.STUCK_RUNS),
            "Runs woken long ago (-c stuckAfterMinutes) are still not moving although the reconciler "
            "re-sent their wakes: lunaflow runs --aws (its why column) or the console says what holds each",
        )
        for name, dlq in dead_letters.items():
            self._any(
                f"DeadLetters{name}",
                dlq.metric_approximate_number_of_messages_visible(period=PERIOD),
                f"Messages reached the dead-letter queue of {name}",
            )
        for name, fn in functions.items():
            self._any(f"{name}Errors", fn.metric_errors(period=PERIOD), f"The {name} function raised")
            self._any(
                f"{name}Throttles",
                fn.metric_throttles(period=PERIOD),
                f"Lambda throttled the {name} function: it reached its reserved concurrency (raise "
                f"-c {name[0].lower()}{name[1:]}Concurrency) or the account's quota",
            )
        runner = functions.get("Runner")
        if runner is not None:
            self._any(
                "RunnerEventsDropped",
                runner.metric("AsyncEventsDropped", period=PERIOD, statistic="Sum"),
                "Lambda dropped hand-offs to the runner (throttled for 15 minutes, or failed: it has no "
                "retries); the reconciler re-sent their runs' wakes through the wake queue, a minute or "
                "more late: raise -c runnerConcurrency if it recurs",
            )
        self._add(
            wake_queue.metric_approximate_age_of_oldest_message(
                period=PERIOD, statistic="Maximum"
            ).create_alarm(
                self,
                "WakeQueueAge",
                threshold=WAKE_AGE_ALARM_S,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=WAKE_AGE_PERIODS,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                alarm_description=f"A wake has waited over {WAKE_AGE_ALARM_S} s in the wake queue for "
                f"{WAKE_AGE_PERIODS} periods: the workers do not keep up (concurrency, throttling, errors)",
            )
        )
        self._any(
            "TableThrottles",
            throttles(table.table_name, None),
            "DynamoDB throttled reads or writes on the journal table (a hot key, or the account's limits)",
        )
        for index in indexes:
            self._any(
                f"IndexThrottles{index}",
                throttles(table.table_name, index),
                f"DynamoDB throttled the index {index}: its writes throttle the table's writes too",
            )

    def _any(self, id: str, watched: cw.Metric | cw.MathExpression, description: str) -> None:
        """An alarm that fires on any occurrence within a period."""
        self._add(
            watched.create_alarm(
                self,
                id,
                threshold=0,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                alarm_description=description,
            )
        )

    def _add(self, alarm: cw.Alarm) -> None:
        alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
        self.alarms.append(alarm)


def throttles(table_name: str, index: str | None) -> cw.MathExpression:
    """Read and write throttle events of the table, or of one of its global secondary indexes."""
    dimensions = {"TableName": table_name}
    if index is not None:
        dimensions["GlobalSecondaryIndexName"] = index
    parts = {
        kind: cw.Metric(
            namespace="AWS/DynamoDB",
            metric_name=f"{name}ThrottleEvents",
            dimensions_map=dimensions,
            statistic="Sum",
            period=PERIOD,
        )
        for kind, name in (("r", "Read"), ("w", "Write"))
    }
    return cw.MathExpression(
        expression="FILL(r, 0) + FILL(w, 0)", using_metrics=parts, period=PERIOD, label="throttle events"
    )

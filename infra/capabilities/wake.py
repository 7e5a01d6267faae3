"""The wake path and timers: the SQS wake queue (and its dead-letter queue), the
EventBridge Scheduler group with the role Scheduler uses to send to the queue, and a rule
that runs the reconciler every minute."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants
from runtime.aws.contract import TIMER_PREFIX


def encrypted_queue(
    scope: Construct, id: str, *, visibility_s: int, dlq: sqs.IQueue | None = None
) -> sqs.Queue:
    return sqs.Queue(
        scope,
        id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        visibility_timeout=Duration.seconds(visibility_s),
        retention_period=Duration.days(constants.DLQ_RETENTION_DAYS),
        dead_letter_queue=None
        if dlq is None
        else sqs.DeadLetterQueue(max_receive_count=constants.MAX_RECEIVES, queue=dlq),
    )


class WakePath(Construct):
    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        self.dead_letters = encrypted_queue(self, "WakeDeadLetters", visibility_s=constants.WAKE_VISIBILITY_S)
        self.queue = encrypted_queue(
            self, "WakeQueue", visibility_s=constants.WAKE_VISIBILITY_S, dlq=self.dead_letters
        )
        self.group = scheduler.CfnScheduleGroup(self, "Timers", name=f"{Stack.of(self).stack_name}-timers")
        self.role = iam.Role(
            self,
            "SchedulerRole",
            # Only this account's schedules in this stack's group may use it (the confused
            # deputy: another account's schedule naming this role is refused).
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": Stack.of(self).account},
                    "ArnEquals": {"aws:SourceArn": self.group.attr_arn},
                },
            ),
            description="EventBridge Scheduler sends timer wakes to the lunaflow wake queue",
        )
        self.queue.grant_send_messages(self.role)

    @property
    def schedules_arn(self) -> str:
        """The runs' timer schedules in the group (``lf-*``), not the declared ones (``lfs-*``),
        which only the stack makes and only the console pauses and resumes."""
        stack = Stack.of(self)
        return stack.format_arn(
            service="scheduler", resource="schedule", resource_name=f"{self.group.name}/{TIMER_PREFIX}*"
        )

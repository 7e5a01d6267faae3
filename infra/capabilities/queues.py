"""User queues: one SQS queue (with a dead-letter queue) per queue the project names, each
with its own ``attempts`` and ``retry_delay`` from lunaflow.toml.

``attempts`` is the queue's ``maxReceiveCount``: SQS moves a message to the dead-letter queue
instead of delivering it once more. The retry delay is not the visibility timeout, which
Lambda needs at least as long as the function's timeout: the queue function hides a failed
message for the delay itself (``ChangeMessageVisibility``). A delay longer than the usual
visibility timeout becomes the queue's, so a message whose invocation crashed waits as long.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants
from infra.capabilities.wake import encrypted_queue
from runtime.aws.contract import user_queue_visibility_s
from runtime.platform.describe import ProjectNeeds


class UserQueues(Construct):
    def __init__(self, scope: Construct, id: str, needs: ProjectNeeds) -> None:
        super().__init__(scope, id)
        self.queues: dict[str, sqs.Queue] = {}
        self.dead_letters: dict[str, sqs.Queue] = {}
        for name, queue in sorted(needs.queue_settings.items()):
            safe = "".join(c if c.isalnum() else "-" for c in name)
            visibility_s = user_queue_visibility_s(queue.retry_delay_s)
            dlq = encrypted_queue(self, f"{safe}DeadLetters", visibility_s=visibility_s)
            self.dead_letters[name] = dlq
            self.queues[name] = sqs.Queue(
                self,
                f"{safe}Queue",
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
                visibility_timeout=Duration.seconds(visibility_s),
                retention_period=Duration.days(constants.DLQ_RETENTION_DAYS),
                dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=queue.attempts, queue=dlq),
            )

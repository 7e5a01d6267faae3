"""User queues: one SQS queue (with a dead-letter queue) per ``on "queue"`` handler."""

from __future__ import annotations

from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants
from infra.capabilities.wake import encrypted_queue


class UserQueues(Construct):
    def __init__(self, scope: Construct, id: str, names: list[str]) -> None:
        super().__init__(scope, id)
        self.queues: dict[str, sqs.Queue] = {}
        self.dead_letters: dict[str, sqs.Queue] = {}
        for name in names:
            safe = "".join(c if c.isalnum() else "-" for c in name)
            dlq = encrypted_queue(self, f"{safe}DeadLetters", visibility_s=constants.USER_QUEUE_VISIBILITY_S)
            self.dead_letters[name] = dlq
            self.queues[name] = encrypted_queue(
                self, f"{safe}Queue", visibility_s=constants.USER_QUEUE_VISIBILITY_S, dlq=dlq
            )

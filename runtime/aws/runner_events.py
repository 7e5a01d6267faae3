"""Lambda's asynchronous invocations of the runner (``functions/runner.py``), as the harness
plays them on moto, whose Lambda runs no code here (FACTS.md): an ``Invoke`` with
``InvocationType`` ``Event`` puts its payload on a queue of the deployment's own
(``deployment.Names.runner_events``), which stands for Lambda's internal event queue. The
harness, and the torture's worker processes, take each event off it and call the runner's
handler with it, one event an invocation, the event gone whatever the outcome: the stack
gives the runner's events no retries (``infra/capabilities/functions.py``), so a failed or
killed activation is healed by the reconciler from the run's wake-up, as on AWS."""

from __future__ import annotations

import json
from typing import Any

from runtime.aws.deployment import ACCOUNT
from runtime.errors import LunaflowError


def runner_arn(region: str, suffix: str) -> str:
    """The runner's ``live`` alias in a harness deployment: an alias ARN of the shape fetch is
    told of (the function's name is CDK's on AWS, this deployment's here)."""
    return f"arn:aws:lambda:{region}:{ACCOUNT}:function:lunaflow-{suffix}-runner:live"


class RunnerEvents:
    """The Lambda client the harness's containers invoke the runner with."""

    def __init__(self, sqs: Any, queue_url: str, runner_arn: str) -> None:
        self._sqs = sqs
        self.queue_url = queue_url
        self.runner_arn = runner_arn
        self.invoked = 0  # events this client queued (tests count hand-offs by it)

    def invoke(self, *, FunctionName: str, InvocationType: str, Payload: bytes | str) -> dict[str, Any]:  # noqa: N803 (botocore's names)
        if InvocationType != "Event" or FunctionName != self.runner_arn:
            raise LunaflowError(
                f"the harness plays only asynchronous invocations of the runner ({self.runner_arn}); "
                f"got {InvocationType} of {FunctionName}"
            )
        body = Payload.decode("utf-8") if isinstance(Payload, bytes) else Payload
        self._sqs.send_message(QueueUrl=self.queue_url, MessageBody=body)
        self.invoked += 1
        return {"StatusCode": 202}

    def take(self) -> list[dict[str, Any]]:
        """Up to ten events, off the queue: each is delivered once, as Lambda delivers an
        event whose function has no retries."""
        got = self._sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
        ).get("Messages", [])
        events = []
        for m in got:
            self._sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"])
            events.append(json.loads(m["Body"]))
        return events

"""The wake path on AWS: SQS messages bring runs to the worker Lambda; timers are SQS
per-message delays when due within 15 minutes, and one EventBridge Scheduler entry per
parked run otherwise (Scheduler fires within a minute of its time, too coarse for a 2s
backoff). A late or repeated delivery is harmless: the worker replays and re-parks."""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from runtime.core.clock import Clock

MAX_SQS_DELAY_S = 900


def schedule_name(run_id: str) -> str:
    """One schedule per run: 'lf-' and 40 hex digits, within Scheduler's 64 of [0-9a-zA-Z-_.]."""
    return "lf-" + hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:40]


def wake_message(run_id: str, reason: str, due_ms: int | None = None) -> str:
    body: dict[str, Any] = {"run_id": run_id, "reason": reason}
    if due_ms is not None:
        body["due_ms"] = due_ms
    return json.dumps(body, separators=(",", ":"))


class AwsWaker:
    def __init__(
        self,
        sqs: Any,
        scheduler: Any,
        clock: Clock,
        *,
        queue_url: str,
        queue_arn: str,
        group: str,
        role_arn: str,
    ) -> None:
        self._sqs = sqs
        self._scheduler = scheduler
        self._clock = clock
        self.queue_url = queue_url
        self.queue_arn = queue_arn
        self.group = group
        self.role_arn = role_arn

    def prompt(self, run_id: str, delay_s: int = 0) -> None:
        self._sqs.send_message(
            QueueUrl=self.queue_url, MessageBody=wake_message(run_id, "wake"), DelaySeconds=delay_s
        )

    def timer(self, run_id: str, due_ms: int | None) -> None:
        name = schedule_name(run_id)
        if due_ms is None:
            self._delete(name)
            return
        wait_s = due_ms / 1000 - self._clock.now()
        if wait_s <= MAX_SQS_DELAY_S:
            self._sqs.send_message(
                QueueUrl=self.queue_url,
                MessageBody=wake_message(run_id, "timer", due_ms),
                DelaySeconds=max(0, min(MAX_SQS_DELAY_S, math.ceil(wait_s))),
            )
            return
        at = datetime.fromtimestamp(math.ceil(due_ms / 1000), UTC).strftime("%Y-%m-%dT%H:%M:%S")
        request = {
            "Name": name,
            "GroupName": self.group,
            "ScheduleExpression": f"at({at})",
            "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "ActionAfterCompletion": "DELETE",
            "State": "ENABLED",
            "Target": {
                "Arn": self.queue_arn,
                "RoleArn": self.role_arn,
                "Input": wake_message(run_id, "timer", due_ms),
            },
        }
        try:
            self._scheduler.create_schedule(**request)
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "ConflictException":
                raise
            self._scheduler.update_schedule(**request)

    def _delete(self, name: str) -> None:
        try:
            self._scheduler.delete_schedule(Name=name, GroupName=self.group)
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise

"""A deployed project's declared schedules, as EventBridge Scheduler holds them: whether
each is paused (``State``), pausing and resuming, and "trigger now" (a tick message sent to
the wake queue, as Scheduler would send it). ``lunaflow schedule ... --aws``, the console's
widgets (``AwsSchedules``) and ``AwsPlatform`` use these.

A pause is the schedule's ``DISABLED`` state. The stack writes ``State: ENABLED``, so a
deploy that changes a schedule's declaration (its expression or input) resumes it; a deploy
that leaves the declaration as it was leaves the pause.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from runtime.aws.config import AwsConfig
from runtime.aws.contract import TICK_TIME, schedule_name, tick_input
from runtime.engine.schedules import Schedule, iso
from runtime.errors import InvalidInput
from runtime.store.items import error_code

# What UpdateSchedule takes from GetSchedule's answer (it replaces the whole schedule).
_KEPT = (
    "Name",
    "GroupName",
    "ScheduleExpression",
    "ScheduleExpressionTimezone",
    "FlexibleTimeWindow",
    "Target",
    # Not StartDate/EndDate: the stack sets none (the runtime keeps the window), and a
    # schedule an older stack made with a StartDate now past would be refused the update.
    "Description",
    "KmsKeyArn",
    "ActionAfterCompletion",
)


def _get(scheduler: Any, config: AwsConfig, name: str) -> dict[str, Any]:
    try:
        found: dict[str, Any] = scheduler.get_schedule(
            Name=schedule_name(name), GroupName=config.scheduler_group
        )
        return found
    except ClientError as e:
        if error_code(e) != "ResourceNotFoundException":
            raise
    raise InvalidInput(
        f"schedule '{name}' has no EventBridge schedule in this deployment (group "
        f"{config.scheduler_group}); deploy the code that declares it"
    )


def is_paused(scheduler: Any, config: AwsConfig, name: str) -> bool:
    return (_get(scheduler, config, name).get("State") or "ENABLED") != "ENABLED"


def set_paused(scheduler: Any, config: AwsConfig, name: str, paused: bool) -> None:
    found = _get(scheduler, config, name)
    request = {k: found[k] for k in _KEPT if found.get(k) is not None}
    request["State"] = "DISABLED" if paused else "ENABLED"
    scheduler.update_schedule(**request)


def send_tick(sqs: Any, config: AwsConfig, name: str, tick_ms: int) -> None:
    """A trigger: the tick message Scheduler sends, for ``tick_ms``, on the wake queue, marked
    as a trigger (which the schedule's window does not hold back)."""
    body = json.loads(tick_input(name).replace(TICK_TIME, iso(tick_ms)))
    sqs.send_message(
        QueueUrl=config.wake_queue_url,
        MessageBody=json.dumps({**body, "trigger": True}, separators=(",", ":")),
    )


class AwsSchedules:
    """A deployment's schedules for the console and ``lunaflow schedules --aws``
    (``runtime/platform/schedules.py: ScheduleControl``): pauses are the Scheduler
    schedules' state; a trigger is the tick message, which the worker fires as Scheduler's
    own (so whether the overlap policy skips it is not known here)."""

    def __init__(self, scheduler: Any, sqs: Any, config: AwsConfig) -> None:
        self.scheduler, self.sqs, self.config = scheduler, sqs, config

    def is_paused(self, name: str) -> bool:
        return is_paused(self.scheduler, self.config, name)

    def set_paused(self, name: str, paused: bool) -> None:
        set_paused(self.scheduler, self.config, name, paused)

    def trigger(self, schedule: Schedule, tick_ms: int) -> bool:
        send_tick(self.sqs, self.config, schedule.name, tick_ms)
        return True

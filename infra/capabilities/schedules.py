"""Declared schedules: one EventBridge Scheduler schedule per ``schedule "name" {...}``.

Each is a cron or rate expression in its time zone, flexible window off, in the timers'
group, sending ``{"schedule": name, "tick": <scheduled time>}`` to the wake queue with the
timers' Scheduler role; a delivery Scheduler gives up on goes to the wake dead-letter queue.
The worker starts the tick's run (``AwsRuntime.tick``). No StartDate or EndDate: Scheduler
refuses a StartDate more than 5 minutes past when it creates the schedule, which a template
synthesized with ``start_at`` in the future meets once that time has come, so the window
(``start_at``/``end_at``) is kept by the worker instead, which starts no run for a tick
outside it. Being resources of the stack, a schedule removed from the project is deleted by
the next deploy, and a changed expression takes effect at deploy. The console function may
read, pause and resume them (an update carries the Scheduler role, which it passes on) and
send a tick to the wake queue ("trigger now"): ``grant_console``.
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_scheduler as scheduler
from constructs import Construct

from infra.capabilities.wake import WakePath
from runtime.aws.contract import schedule_name, tick_input
from runtime.platform.describe import ProjectNeeds


class Schedules(Construct):
    def __init__(self, scope: Construct, id: str, needs: ProjectNeeds, wake: WakePath) -> None:
        super().__init__(scope, id)
        self.wake = wake
        self.schedules: dict[str, scheduler.CfnSchedule] = {}
        if needs.schedules:
            wake.dead_letters.grant_send_messages(wake.role)
        for name, declared in sorted(needs.schedules.items()):
            safe = "".join(c if c.isalnum() else "-" for c in name)
            made = scheduler.CfnSchedule(
                self,
                f"{safe}Schedule",
                name=schedule_name(name),
                group_name=wake.group.name,
                description=f"lunaflow schedule '{name}': starts workflow '{declared.workflow}'",
                schedule_expression=declared.expression(),
                schedule_expression_timezone=declared.timezone,
                flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
                state="ENABLED",
                target=scheduler.CfnSchedule.TargetProperty(
                    arn=wake.queue.queue_arn,
                    role_arn=wake.role.role_arn,
                    input=tick_input(name),
                    dead_letter_config=scheduler.CfnSchedule.DeadLetterConfigProperty(
                        arn=wake.dead_letters.queue_arn
                    ),
                ),
            )
            made.add_dependency(wake.group)
            self.schedules[name] = made

    def grant_console(self, fn: iam.IGrantable) -> None:
        """Read, pause and resume the declared schedules, these only (the runs' timers share
        the group); the tick a trigger sends goes through the wake queue it may already send to."""
        if not self.schedules:
            return
        arns = [made.attr_arn for _, made in sorted(self.schedules.items())]
        fn.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["scheduler:GetSchedule", "scheduler:UpdateSchedule"], resources=arns)
        )
        fn.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[self.wake.role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
            )
        )

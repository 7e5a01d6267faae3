"""Declared schedules in the synthesized template: one EventBridge Scheduler schedule each,
in the timers' group, to the wake queue with the timers' role and dead-letter queue, with no
StartDate or EndDate; and cfn-lint clean. One synthesis for the module (``schedules_project``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cfnlint.api import lint_file  # type: ignore[import-untyped]

from conftest import Synth
from runtime.aws.contract import TICK_TIME


def _schedules(synth: Synth) -> dict[str, dict[str, Any]]:
    return {p["Name"]: p for p in synth.of_type("AWS::Scheduler::Schedule").values()}


def test_one_scheduler_schedule_per_declared_schedule(schedules_project: Synth) -> None:
    found = _schedules(schedules_project)
    assert sorted(found) == ["lfs-nightly-report", "lfs-often", "lfs-weekdays"]
    nightly = found["lfs-nightly-report"]
    assert nightly["ScheduleExpression"] == "cron(0 3 * * ? *)"
    assert nightly["ScheduleExpressionTimezone"] == "Europe/Paris"
    assert nightly["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert nightly["State"] == "ENABLED"
    assert json.loads(nightly["Target"]["Input"]) == {"schedule": "nightly-report", "tick": TICK_TIME}
    often = found["lfs-often"]
    assert often["ScheduleExpression"] == "rate(15 minutes)"
    # No window on Scheduler's side: a StartDate past by the time the stack is deployed (this
    # one, 2026-12-01, is) makes Scheduler refuse the schedule; the worker keeps the window.
    assert [(n, k) for n, p in found.items() for k in ("StartDate", "EndDate") if k in p] == []
    assert found["lfs-weekdays"]["ScheduleExpression"] == "cron(0/20 9-17 ? * MON,TUE,WED,THU,FRI *)"


def test_schedules_use_the_timers_group_queue_role_and_dead_letters(schedules_project: Synth) -> None:
    stack = schedules_project.stack
    wake = stack.wake
    queue = f"<GetAtt:{schedules_project.id(wake.queue)}.Arn>"
    dlq = f"<GetAtt:{schedules_project.id(wake.dead_letters)}.Arn>"
    role = f"<GetAtt:{schedules_project.id(wake.role)}.Arn>"
    for props in _schedules(schedules_project).values():
        assert props["GroupName"] == wake.group.name
        assert props["Target"]["Arn"] == queue
        assert props["Target"]["RoleArn"] == role
        assert props["Target"]["DeadLetterConfig"] == {"Arn": dlq}
    sends = [
        s
        for s in schedules_project.role_statements(schedules_project.id(wake.role))
        if "sqs:SendMessage" in s["Action"]
    ]
    assert {
        r for s in sends for r in ([s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"])
    } >= {
        queue,
        dlq,
    }


def test_cfn_lint_is_clean_on_the_schedules_template(schedules_project: Synth) -> None:
    findings = lint_file(Path(schedules_project.outdir / f"{schedules_project.name}.template.json"))
    # W3005 on CDK's function DependsOn its own role is the one accepted finding (test_nag_and_lint).
    assert [f"{m.rule.id} {m.path}: {m.message}" for m in findings if m.rule.id != "W3005"] == []

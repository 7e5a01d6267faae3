"""Declared schedules on the AWS path (moto through ``AwsPlatform``): the deployment makes one
EventBridge Scheduler schedule each as the stack does, a deploy deletes one no longer
declared, and tick messages the worker cannot serve are dropped, not retried."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.aws.contract import SCHEDULE_PREFIX, TICK_TIME
from runtime.testing import AwsPlatform

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "schedules"


def deployed(p: AwsPlatform) -> dict[str, dict]:
    scheduler, group = p.clients.scheduler, p.config.scheduler_group
    names = [
        s["Name"] for s in scheduler.list_schedules(GroupName=group, NamePrefix=SCHEDULE_PREFIX)["Schedules"]
    ]
    return {n: scheduler.get_schedule(Name=n, GroupName=group) for n in names}


def test_the_deployment_has_one_scheduler_schedule_per_declaration() -> None:
    with AwsPlatform(PROJECT) as p:
        found = deployed(p)
        assert sorted(found) == [
            f"lfs-{n}" for n in ("nightly", "quarter", "slow-allow", "slow-cancel", "slow-skip")
        ]
        nightly = found["lfs-nightly"]
        assert nightly["ScheduleExpression"] == "cron(0 3 * * ? *)"
        assert nightly["ScheduleExpressionTimezone"] == "Europe/Paris"
        assert nightly["FlexibleTimeWindow"] == {"Mode": "OFF"}
        assert nightly["Target"]["Arn"] == p.config.wake_queue_arn
        assert json.loads(nightly["Target"]["Input"]) == {"schedule": "nightly", "tick": TICK_TIME}
        assert found["lfs-quarter"]["ScheduleExpression"] == "rate(15 minutes)"
        # As the stack makes them: the window (quarter's start_at, end_at) is the worker's.
        assert [n for n, s in found.items() if "StartDate" in s or "EndDate" in s] == []


def test_a_deploy_deletes_a_schedule_no_longer_declared_and_keeps_a_pause(tmp_path: Path) -> None:
    changed = tmp_path / "changed"
    changed.mkdir()
    text = (PROJECT / "main.lua").read_text(encoding="utf-8")
    kept = "\n".join(line for line in text.splitlines() if not line.startswith('schedule "quarter"'))
    (changed / "main.lua").write_text(kept + "\n", encoding="utf-8")
    with AwsPlatform(PROJECT) as p:
        p.pause_schedule("nightly")
        p.deploy(changed)
        found = deployed(p)
        assert "lfs-quarter" not in found and "lfs-nightly" in found
        assert found["lfs-nightly"]["State"] == "DISABLED"


@pytest.mark.parametrize(
    "body",
    [
        {"schedule": "gone", "tick": "2026-01-01T02:00:00Z"},  # not declared by the deployed code
        {"schedule": "nightly", "tick": "yesterday"},  # not a time Scheduler sends
    ],
)
def test_a_tick_the_worker_cannot_serve_is_dropped(body: dict) -> None:
    with AwsPlatform(PROJECT) as p:  # strict: a failed wake would raise from settle
        p.clients.sqs.send_message(QueueUrl=p.config.wake_queue_url, MessageBody=json.dumps(body))
        p.settle()
        assert p.runs() == []

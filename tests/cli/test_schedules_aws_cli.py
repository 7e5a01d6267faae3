"""Issue 28 point 1's leftover: ``lunaflow schedules --aws`` and ``lunaflow schedule
pause|resume|trigger NAME --aws`` as processes of their own against the AwsPlatform's moto
stack (tests/support/aws_stack.py): the list names each deployed schedule, a pause disables
its EventBridge Scheduler schedule and a resume enables it, and a trigger starts the tick's
run through the stack's queue."""

from __future__ import annotations

import json
from pathlib import Path

from runtime.testing import AwsPlatform
from tests.support.aws_stack import moto_env, put_behind_stack
from tests.support.cli import cli

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "schedules"
STACK = "lunaflow-cli-schedules"


def test_schedules_pause_resume_and_trigger_on_aws(tmp_path: Path) -> None:
    with AwsPlatform(PROJECT, data_dir=tmp_path / "aws") as p:
        put_behind_stack(p, STACK)
        env = moto_env(p)
        where = ("-p", str(PROJECT), "--aws", "--stack", STACK)

        listed = cli("schedules", *where, "--json", env=env)
        assert listed.code == 0, str(listed)
        rows = {r["schedule"]: r for r in json.loads(listed.out)}
        assert sorted(rows) == ["nightly", "quarter", "slow-allow", "slow-cancel", "slow-skip"]
        assert rows["nightly"]["paused"] is False

        paused = cli("schedule", "pause", "nightly", *where, env=env)
        assert paused.code == 0, str(paused)
        again = {r["schedule"]: r for r in json.loads(cli("schedules", *where, "--json", env=env).out)}
        assert again["nightly"]["paused"] is True
        assert cli("schedule", "resume", "nightly", *where, env=env).code == 0
        resumed = {r["schedule"]: r for r in json.loads(cli("schedules", *where, "--json", env=env).out)}
        assert resumed["nightly"]["paused"] is False

        triggered = cli("schedule", "trigger", "nightly", *where, env=env)
        assert triggered.code == 0, str(triggered)
        p.settle()
        assert [r.id.split("@")[0] for r in p.runs() if r.id.startswith("nightly@")] == ["nightly"]

"""Issue 26 point 4 on AWS from the command line: `lunaflow start --timeout ... --aws` runs
the CLI in a process of its own against the AwsPlatform's moto stack (a CloudFormation stack
whose outputs name the harness's table, queue, scheduler group and bucket, found as a
deployed stack is). The bound is journaled in `run.started`, a bound over 36,500 days is
refused with nothing written, the workflow's default applies without `--timeout`, and the
run's first activation arms its durable timer at the bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.errors import NoSuchRun
from runtime.testing import AwsPlatform
from tests.support.aws_stack import moto_env, put_behind_stack
from tests.support.cli import cli

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "failures"
STACK = "lunaflow-cli-timeout"


def _stack(p: AwsPlatform) -> dict[str, str]:
    """Put the harness's deployment behind a CloudFormation stack, as `cdk deploy` would;
    returns the environment a CLI process reaches that moto server with."""
    put_behind_stack(p, STACK)
    return moto_env(p)


def test_start_timeout_on_aws(tmp_path: Path) -> None:
    with AwsPlatform(PROJECT, data_dir=tmp_path / "aws") as p:
        env = _stack(p)
        where = ("-p", str(PROJECT), "--aws", "--stack", STACK)

        refused = cli("start", "bounded-default", "--id", "a-1", "--timeout", "36501d", *where, env=env)
        assert refused.code == 1, str(refused)
        assert "bad duration \"36501d\" for the timeout of run 'a-1'" in refused.err
        with pytest.raises(NoSuchRun):
            p.get("a-1")  # nothing was written

        done = cli("start", "bounded-default", "--id", "a-1", "--timeout", "3d", *where, "--json", env=env)
        assert done.code == 0, str(done)
        assert json.loads(done.out)["id"] == "a-1"
        started = p.journal("a-1")[0]
        assert started.data["timeout"] == "3d"
        deadline = started.data["deadline_at"]
        assert deadline == round(started.at * 1000) + 3 * 86_400_000

        # Without --timeout, the workflow's own default (2h).
        assert cli("start", "bounded-default", "--id", "a-2", *where, env=env).code == 0, "a-2"
        assert p.journal("a-2")[0].data["timeout"] == "2h"

        # The run's first activation parks it on its wait with the bound as its timer.
        p.settle()
        assert p.get("a-1").status == "awaiting"
        assert p.platform.store.timer("a-1") == deadline

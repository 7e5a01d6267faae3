"""`lunaflow start ... --signal NAME --aws` (issue 28.4/28.5) as a real process against the
moto server an ``AwsPlatform`` serves, the stack found through CloudFormation outputs as on
AWS; and the same process SIGKILLed right after its one TransactWriteItems: no prompt was
sent, and the reconciler heals the wake-up the write recorded, so the run runs once with
its signal."""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.core.clock import FakeClock
from runtime.core.journal import Kind
from runtime.platform.faults import KILL_AFTER_STARTS
from runtime.testing import AwsPlatform
from tests.support.aws_stack import moto_env, put_behind_stack
from tests.support.cli import Done, cli

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "signal_start"


@pytest.fixture
def p(tmp_path: Path) -> Iterator[AwsPlatform]:
    # The CLI process keeps the real time, so the harness's clock starts there too.
    with AwsPlatform(PROJECT, data_dir=tmp_path / "aws", clock=FakeClock(time.time())) as platform:
        yield platform


@pytest.fixture
def stack(p: AwsPlatform) -> str:
    """A CloudFormation stack whose outputs name the harness's deployment, as `cdk deploy`'s
    name the real one (one moto server serves the test process: each test its own stack)."""
    name = f"lunaflow-sws-{uuid.uuid4().hex[:8]}"
    put_behind_stack(p, name)
    return name


def start_on_aws(p: AwsPlatform, stack: str, *extra: str, env: dict[str, str] | None = None) -> Done:
    aws = moto_env(p)
    return cli(
        "start", "order", '{"n": 1}', "--id", "order-1", "--signal", "paid", "--payload", '{"by": "ada"}',
        "--aws", "--stack", stack, "-p", str(PROJECT), *extra, env={**aws, **(env or {})},
    )  # fmt: skip


def catch_up(p: AwsPlatform, beyond_s: float = 2.0) -> None:
    """Move the harness's clock past the real time the CLI wrote at."""
    p.advance(max(0.0, time.time() - p.now) + beyond_s)


def test_start_with_a_signal_on_aws(p: AwsPlatform, stack: str) -> None:
    done = start_on_aws(p, stack, "--json")
    assert done.code == 0, done
    out = json.loads(done.out)
    assert (out["id"], out["signal"], out["delivered"]) == ("order-1", "paid", True)
    catch_up(p)
    run = p.get("order-1")
    assert (run.status, run.result) == ("completed", {"outcome": "paid", "by": "ada", "n": 1})


def test_a_start_with_a_signal_on_aws_killed_after_its_write_runs_once_with_its_signal(
    p: AwsPlatform, stack: str
) -> None:
    killed = start_on_aws(p, stack, env={KILL_AFTER_STARTS: "1"})
    assert killed.code == -signal.SIGKILL, killed
    assert [r.id for r in p.runs()] == ["order-1"]
    assert [(s.name, s.payload, s.state) for s in p.platform.store.signals("order-1")] == [
        ("paid", {"by": "ada"}, "pending")
    ]
    catch_up(p)
    assert p.get("order-1").status == "running"  # its prompt died with the process
    p.advance("2m")  # the reconciler finds the wake-up the write recorded
    run = p.get("order-1")
    assert (run.status, run.result) == ("completed", {"outcome": "paid", "by": "ada", "n": 1})
    assert [e.kind for e in p.journal("order-1")].count(Kind.STARTED) == 1
    assert [s.state for s in p.platform.store.signals("order-1")] == ["consumed"]

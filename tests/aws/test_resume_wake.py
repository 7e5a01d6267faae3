"""A resume, a retry now and a cancel's cleanup move a run to running from outside an
activation, and it then needs a worker. Its wake-up was a write after the one that moved it:
a crash between the two left the run running with no wake-up, for the reconciler's list of
running runs to find five minutes later. Now the write that makes it running records the
wake-up too (``RunUpdate.woken``); what follows is only the prompt."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Kind
from runtime.engine.wake import Wakes
from runtime.store.dynamodb import RUN_SK, run_pk
from runtime.testing import AwsPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_statuses"


@pytest.fixture
def p() -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT) as platform:
        yield platform


class Crash(BaseException):
    """The process dying at this instant."""


def test_a_resume_records_the_run_s_wake_up_in_the_write_that_makes_it_running(
    p: AwsPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert p.start("boom", None, id="b1").status == "failed"

    def crash(*_: Any, **__: Any) -> None:
        raise Crash

    monkeypatch.setattr(Wakes, "wake", crash)
    monkeypatch.setattr(Wakes, "prompt", crash)
    with pytest.raises(Crash):
        p.resume("b1")
    item = p.clients.dynamodb.get_item(
        TableName=p.config.table, Key={"pk": {"S": run_pk("b1")}, "sk": {"S": RUN_SK}}, ConsistentRead=True
    )["Item"]
    assert item["status"]["S"] == "running" and "wake_pk" in item, item
    monkeypatch.undo()
    p.restart()
    p.advance("2m")  # the reconciler finds the wake-up a minute on: the run replays, fails again
    run = p.get("b1")
    assert run.status == "failed" and "boom" in (run.error or "")
    assert [e.kind for e in p.journal("b1")].count(Kind.RESUMED) == 1

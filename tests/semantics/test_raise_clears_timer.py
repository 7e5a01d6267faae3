"""Issue 24 §7: a run failed by a raise in its workflow code keeps no timer, on either
platform. Every other way a run stops clears it; `Executor._raised` did not, so the timer
(locally `next_due`, on AWS the schedule and the timers index) fired later for a failed run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.platform.harness import Harness
from runtime.testing import AwsPlatform, LocalPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_retries"


@pytest.fixture(params=["local", "aws"])
def p(request: pytest.FixtureRequest) -> Iterator[Harness]:
    with LocalPlatform(PROJECT) if request.param == "local" else AwsPlatform(PROJECT) as platform:
        yield platform


def test_a_run_failed_by_a_raise_keeps_no_timer(p: Harness) -> None:
    p.start("wait-then-raise", None, id="raise-1")
    store = p.platform.store
    assert store.timer("raise-1") is not None
    p.signal("raise-1", "go", {"n": 2})
    assert (p.get("raise-1").status, p.get("raise-1").error) == ("failed", "raised after 2")
    assert store.timer("raise-1") is None
    assert store.next_due() is None

"""Issue 29.4: "Why is this run not moving? One line per run": each reason produced by a
real run on both harnesses, read through ``Runs.why`` (what ``lunaflow show``, ``lunaflow
runs`` and the console print). The fake clock starts at 2026-01-01T00:00:00Z."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.platform.why import STUCK_AFTER_S, why

PROJECTS = Path(__file__).resolve().parents[1] / "projects"
PROJECT = PROJECTS / "why"


@pytest.fixture
def p(harness: Any, tmp_path: Path) -> Iterator[Any]:
    with harness(PROJECT, data_dir=tmp_path) as plat:
        yield plat


def line(p: Any, run_id: str) -> str:
    return str(p.platform.why(p.get(run_id)).text)


def test_a_run_waiting_on_a_signal_says_which_since_when_and_its_timeout(p: Any) -> None:
    p.start("waiter", None, id="w1")
    assert line(p, "w1") == (
        "waiting on signal 'paid' since 2026-01-01 00:00:00 UTC (times out at 2026-01-04 00:00:00 UTC)"
    )
    p.start("racer", None, id="r1")
    said = "waiting on signal 'paid' or 'cancelled' since 2026-01-01 00:00:00 UTC (no timeout)"
    assert line(p, "r1") == said


def test_a_sleeping_run_says_until_when(p: Any) -> None:
    p.advance("30m")
    p.start("napper", None, id="n1")
    assert line(p, "n1") == "sleeping until 2026-01-01 02:30:00 UTC"


def test_a_run_in_a_backoff_says_which_attempt_is_due_when(p: Any) -> None:
    p.start("flaky", None, id="f1")
    assert line(p, "f1") == (
        "attempt 2 of step 'charge' due at 2026-01-01 00:00:10 UTC (attempt 1 failed: card declined)"
    )
    p.advance("10s")
    assert line(p, "f1").startswith("attempt 3 of step 'charge' due at 2026-01-01 00:00:30 UTC")


def test_a_failed_run_says_so_and_how_to_go_on(p: Any) -> None:
    p.start("flaky", None, id="f2")
    p.advance("1m")
    assert line(p, "f2") == (
        "failed at 2026-01-01 00:00:30 UTC: step 'charge' failed after 3 attempts: card declined; "
        "resume it once the cause is fixed"
    )


def test_a_parent_says_which_child_it_waits_for(p: Any) -> None:
    p.start("parent", None, id="pa")
    assert line(p, "pa") == (
        "waiting for child 'pa-kid' since 2026-01-01 00:00:00 UTC (times out at 2026-01-01 01:00:00 UTC)"
    )


def test_a_run_its_code_cannot_replay_is_stuck(p: Any) -> None:
    p.start("waiter", None, id="w2")
    p.deploy(PROJECTS / "why_v2")
    p.signal("w2", "paid", {"by": "ada"})
    moving = p.platform.why(p.get("w2"))
    assert moving.stuck
    assert moving.text.startswith("stuck: its code cannot replay it (journal divergence: expected await")
    assert moving.text.endswith("deploy code that keeps its path and resume it")


def test_a_woken_run_is_queued_then_stuck_when_no_worker_takes_it(p: Any) -> None:
    p.start("waiter", None, id="w3")
    p.platform.store.add_wakeup("w3")  # asked to advance; the harness has not settled
    run, now = p.get("w3"), p.platform.clock.now()
    queued = p.platform.why(run)
    said = "queued: woken at 2026-01-01 00:00:00 UTC, waiting for a worker"
    assert (queued.text, queued.stuck) == (said, False)
    store = p.platform.store
    late = why(run, store.journal("w3"), store.timer("w3"), store.progress("w3"), now + STUCK_AFTER_S + 1)
    assert late.stuck and late.text.startswith("stuck: woken at 2026-01-01 00:00:00 UTC and not taken")
    p.settle()
    assert not p.platform.why(p.get("w3")).stuck


def test_a_run_another_worker_holds_says_whose_lease(p: Any) -> None:
    p.start("waiter", None, id="w4")
    now_ms = int(p.platform.clock.now() * 1000)
    assert p.platform.store.acquire_lease("w4", "worker-elsewhere", now_ms, 30_000) == "ok"
    said = "being advanced by worker-elsewhere (its lease runs until 2026-01-01 00:00:30 UTC)"
    assert line(p, "w4") == said


def test_a_timer_long_past_due_is_stuck(p: Any) -> None:
    p.start("napper", None, id="n2")
    run, store = p.get("n2"), p.platform.store
    due = store.timer("n2")
    assert due is not None
    late = why(run, store.journal("n2"), due, store.progress("n2"), due / 1000 + STUCK_AFTER_S + 1)
    assert late.stuck and late.text.startswith("stuck: its timer was due at 2026-01-01 02:00:00 UTC")


def test_a_lease_taken_before_the_due_time_does_not_say_the_timer_fired(p: Any) -> None:
    """A wake with no work (a duplicate) leased the sleeping run before its timer was due and
    lapsed after it: the run was never taken at its timer, whose line stays as it was."""
    p.start("napper", None, id="n3")
    store = p.platform.store
    due = store.timer("n3")
    assert due is not None
    assert store.acquire_lease("n3", "early-worker", due - 10_000, 30_000) == "ok"
    run = p.get("n3")
    assert run.status == "sleeping"
    late = why(
        run, store.journal("n3"), store.timer("n3"), store.progress("n3"), due / 1000 + STUCK_AFTER_S + 1
    )
    assert late.stuck and late.text.startswith(
        "stuck: its timer was due at 2026-01-01 02:00:00 UTC and has not fired"
    ), late.text

"""Issue 26 point 5, cleanup on cancel (``wf:on_cancel``), and the overall bound of a wait
(``wf:all``'s ``within``), on both harnesses.

Step bodies call ``Ledger(wf.id)``, an object stand-in recording each call; ``release``
fails while ``ledger.failing`` is set.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.dev.check import check_runs
from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parent.parent / "projects" / "on_cancel"


class Ledger:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.failing = 0  # how many release calls fail before one succeeds

    def __call__(self, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        self.calls.append((key, method, args[0] if args else None))
        if method == "release":
            ok = self.failing <= 0
            self.failing -= 1
            return [{"ok": ok, "note": f"release:{args[0]}"}]
        return [f"{method}:{args[0] if args else ''}"]

    def of(self, key: str) -> list[str]:
        return [m if a is None else f"{m}:{a}" for k, m, a in self.calls if k == key]


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture
def p(harness: Any, tmp_path: Path, ledger: Ledger) -> Iterator[Any]:
    with harness(PROJECT, data_dir=tmp_path / "data", objects=ledger) as platform:
        yield platform


def kinds(p: LocalPlatform, run_id: str) -> list[str]:
    return [e.kind for e in p.journal(run_id)]


def test_a_cancel_runs_the_handler_then_ends_the_run_cancelled(p: LocalPlatform, ledger: Ledger) -> None:
    p.start("order", {}, id="o-1")
    assert p.get("o-1").status == "awaiting"
    p.cancel("o-1")
    run = p.get("o-1")
    assert run.status == "cancelled", run.error
    assert run.error is None
    assert ledger.of("o-1") == ["note:reserve", "release:note:reserve", "note:notify"]
    k = kinds(p, "o-1")
    assert k[:4] == ["run.started", "step.intent", "step.result", "cancel.handler"]
    assert k[4:] == [
        "wait",
        "run.cancel_requested",
        "step.intent",
        "step.result",
        "step.intent",
        "step.result",
        "run.cancelled",
    ]
    assert p.journal("o-1")[-1].data == {"cleanup": "done"}
    assert not p.signal("o-1", "paid")  # ended: the workflow function never goes on


def test_a_run_without_a_handler_is_cancelled_as_before(p: LocalPlatform) -> None:
    p.start("plain", None, id="pl-1")
    p.cancel("pl-1")
    assert p.get("pl-1").status == "cancelled"
    assert kinds(p, "pl-1")[-2:] == ["wait", "run.cancelled"]
    assert p.journal("pl-1")[-1].data == {}


def test_the_handlers_steps_are_retried_and_its_waits_are_durable(p: LocalPlatform, ledger: Ledger) -> None:
    ledger.failing = 2
    p.start("order", {"wait": "30m"}, id="o-2")
    p.cancel("o-2")
    assert p.get("o-2").status == "sleeping"  # the release's backoff
    p.advance("10s")
    p.advance("20s")
    assert p.get("o-2").status == "sleeping"  # the handler's own sleep
    assert p.get("o-2").current_step == "sleep"
    p.advance("1h")
    assert p.get("o-2").status == "cancelled"
    assert ledger.of("o-2").count("release:note:reserve") == 3
    assert ledger.of("o-2")[-1] == "note:notify"


def test_a_second_cancel_while_the_cleanup_runs_starts_no_second_cleanup(
    p: LocalPlatform, ledger: Ledger
) -> None:
    ledger.failing = 1
    p.start("order", {}, id="o-3")
    p.cancel("o-3")
    assert p.get("o-3").status == "sleeping"
    p.cancel("o-3")
    p.cancel("o-3")
    p.advance("10s")
    assert p.get("o-3").status == "cancelled"
    assert kinds(p, "o-3").count("run.cancel_requested") == 1
    assert ledger.of("o-3").count("note:notify") == 1


def test_the_cascade_reaches_the_children_after_the_cleanup(p: LocalPlatform, ledger: Ledger) -> None:
    ledger.failing = 1
    p.start("order", {"child": True}, id="o-4")
    assert p.get("o-4-child").status == "awaiting"
    p.cancel("o-4")
    # The parent cleans up (its release is in its backoff): its child is still live.
    assert p.get("o-4").status == "sleeping"
    assert p.get("o-4-child").status == "awaiting"
    # The cancel's intent stays while the cleanup runs: a sweep of unfinished cascades (a
    # restart, the reconciler) leaves the child to the cleanup's end.
    assert p.platform.store.pending_cancels() == ["o-4"]
    assert p.platform.finish_cancels() == []
    assert p.get("o-4-child").status == "awaiting"
    assert p.platform.store.pending_cancels() == ["o-4"]
    p.advance("10s")
    assert p.get("o-4").status == "cancelled"
    # The child has its own handler: it cleaned up too, then ended cancelled.
    assert p.get("o-4-child").status == "cancelled"
    assert "release:note:reserve" in ledger.of("o-4-child")
    assert p.platform.store.pending_cancels() == []


def test_a_handler_that_raises_ends_the_run_cancelled_with_its_error(p: LocalPlatform) -> None:
    p.start("bad-cleanup", None, id="b-1")
    p.cancel("b-1")
    run = p.get("b-1")
    assert run.status == "cancelled"
    assert run.error is not None and "its cleanup failed: no refunds today" in run.error
    assert p.journal("b-1")[-1].data["cleanup"] == "failed"


def test_a_cleanup_step_out_of_attempts_ends_the_run_cancelled(p: LocalPlatform, ledger: Ledger) -> None:
    ledger.failing = 10
    p.start("order", {"retries": 2}, id="o-5")
    p.cancel("o-5")
    p.advance("10s")
    run = p.get("o-5")
    assert run.status == "cancelled"
    assert run.error is not None and "step 'release' failed after 2 attempts" in run.error
    assert "note:notify" not in ledger.of("o-5")


def test_the_budget_in_time_cuts_a_cleanup_short(p: LocalPlatform, ledger: Ledger) -> None:
    p.start("order", {"budget": "30m", "wait": "2h"}, id="o-6")
    p.cancel("o-6")
    assert p.get("o-6").status == "sleeping"
    p.advance("30m")
    run = p.get("o-6")
    assert run.status == "cancelled"
    assert run.error is not None and "cut short" in run.error
    assert "note:notify" not in ledger.of("o-6")
    assert p.journal("o-6")[-1].data["cleanup"] == "cut short"


def test_the_budget_in_steps_cuts_a_cleanup_short(p: LocalPlatform) -> None:
    p.start("endless-cleanup", None, id="e-1")
    p.cancel("e-1")
    run = p.get("e-1")
    assert run.status == "cancelled"
    assert run.error is not None and "it started 100 step attempts" in run.error
    assert kinds(p, "e-1").count("step.intent") == 100


def test_a_failed_run_is_cancelled_at_once_without_its_cleanup(p: LocalPlatform) -> None:
    p.start("fails", None, id="f-1")
    assert p.get("f-1").status == "failed"
    p.cancel("f-1")
    assert p.get("f-1").status == "cancelled"
    assert kinds(p, "f-1")[-2:] == ["step.failed", "run.cancelled"]


@pytest.mark.parametrize(
    ("workflow", "says"),
    [
        ("twice", "wf:on_cancel was called twice in run 'bad'; a run has one cancel handler"),
        ("not-a-function", "wf:on_cancel needs a function (got a string value)"),
        ("in-a-step", "wf:on_cancel was called inside step 's'"),
        ("bad-option", "wf:on_cancel: unknown option 'timout'; its only option is timeout"),
        ("bad-budget", 'bad duration "soon" for the timeout of wf:on_cancel'),
    ],
)
def test_bad_registrations_are_refused_before_anything_is_journaled(
    p: LocalPlatform, workflow: str, says: str
) -> None:
    p.start(workflow, None, id="bad")
    run = p.get("bad")
    assert run.status == "failed"
    assert run.error is not None and says in run.error, run.error
    handlers = [e for e in p.journal("bad") if e.kind == "cancel.handler"]
    assert len(handlers) == (1 if workflow == "twice" else 0)  # the first call of two stands


# --- the overall bound of a wait ----------------------------------------------------------


def test_all_within_bounds_the_whole_wait(p: LocalPlatform) -> None:
    # Per entry alone, b and c would wait an hour each after a: 2h30m in all.
    p.start("gather", {"timeout": "1h", "within": "90m"}, id="g-1")
    p.advance("30m")
    p.signal("g-1", "a", 1)
    p.advance("59m")
    assert p.get("g-1").status == "awaiting"
    p.advance("1m")  # 90 minutes: b's wait ends there, and c has nothing left
    run = p.get("g-1")
    assert run.status == "completed"
    assert run.result == {"a": 1}
    done = [e.data["by"] for e in p.journal("g-1") if e.kind == "wait.done"]
    assert done == ["signal", "timeout", "timeout"]


def test_all_within_alone_gives_each_entry_what_is_left(p: LocalPlatform) -> None:
    p.start("gather", {"within": "2h"}, id="g-2")
    p.advance("1h")
    p.signal("g-2", "b", 2)  # kept until its entry is reached
    p.signal("g-2", "a", 1)
    p.advance("59m")
    assert p.get("g-2").status == "awaiting"
    p.advance("1m")
    run = p.get("g-2")
    assert run.status == "completed"
    assert run.result == {"a": 1, "b": 2}
    waits = [e for e in p.journal("g-2") if e.kind == "wait"]
    assert len({e.data["due_at"] for e in waits}) == 1  # one bound for all three


def test_a_bad_within_is_refused(p: LocalPlatform) -> None:
    p.start("gather", {"within": "later"}, id="g-3")
    run = p.get("g-3")
    assert run.status == "failed"
    assert run.error is not None and 'bad duration "later" for the within of wf:all' in run.error
    assert kinds(p, "g-3") == ["run.started"]


def test_check_replays_a_cleanup_and_reports_code_that_dropped_the_handler(
    p: LocalPlatform, ledger: Ledger
) -> None:
    ledger.failing = 1
    p.start("order", {}, id="o-8")
    p.cancel("o-8")  # its cleanup's release waits out its backoff
    p.start("order", {}, id="o-9")  # registered, not cancelled
    found = {v.run_id: v for v in check_runs(p.platform.worker, p.platform.store)}
    assert (found["o-8"].diverges, found["o-8"].message) == (
        False,
        "replays cleanly; parked at step 'release'",
    )
    dropped = p.platform.load(PROJECT.parent / "on_cancel_v2")
    found = {v.run_id: v for v in check_runs(dropped, p.platform.store)}
    for run_id in ("o-8", "o-9"):
        assert found[run_id].diverges
        assert found[run_id].message == "journal divergence: expected wf:on_cancel, code reached await 'paid'"


def test_a_parent_cancelled_while_it_waits_on_a_child_cleans_up_then_cancels_the_child(
    p: LocalPlatform,
) -> None:
    p.start("waits-on-child", None, id="w-1")
    assert p.get("w-1").status == "awaiting"
    assert p.get("w-1-kid").status == "awaiting"
    p.cancel("w-1")
    assert p.get("w-1").status == "cancelled", p.get("w-1").error
    assert p.get("w-1").error is None
    assert kinds(p, "w-1")[-4:] == ["run.cancel_requested", "step.intent", "step.result", "run.cancelled"]
    assert p.get("w-1-kid").status == "cancelled"

"""Issue 27.2: branches that run at once. ``wf:map(items, workflow, opts)`` runs one child
run per item, at most ``limit`` at a time, and answers their results in argument order;
``wf:all_of(handles)`` waits for child runs already started. Branches are child runs, so
their effects overlap on as many workers as the platform has, and the parent waits for them
in argument order: its journal is the same whatever order they ended in. A failed branch
raises after every branch has settled. Both harnesses."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Status
from runtime.errors import InvalidInput

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "branches"


class Ledger:
    """The Desk object: each effect once per step id (what a branch's step did)."""

    def __init__(self) -> None:
        self.effects: dict[str, int] = {}

    def __call__(self, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        n, step_id = args
        self.effects.setdefault(step_id, n)
        return [n]


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture
def p(harness: Any, tmp_path: Path, ledger: Ledger) -> Iterator[Any]:
    with harness(PROJECT, data_dir=tmp_path, objects=ledger) as plat:
        yield plat


def kinds(p: Any, run_id: str) -> list[str]:
    return [e.kind.value for e in p.journal(run_id)]


def waiting(n: int) -> list[dict[str, Any]]:
    return [{"n": i, "wait": True} for i in range(1, n + 1)]


def test_results_come_back_in_argument_order_whatever_order_the_branches_end_in(p: Any) -> None:
    fan = p.start("fan", {"items": waiting(4)}, id="fan-1")
    assert fan.status == Status.AWAITING and fan.current_step == "child 'fan-1.child-1'"
    children = [f"fan-1.child-{i}" for i in range(1, 5)]
    assert [p.get(c).status for c in children] == [Status.AWAITING] * 4, "every branch runs at once"
    for c in reversed(children):
        p.signal(c, "go", "ok")
    done = p.get("fan-1")
    assert (done.status, done.result) == (Status.COMPLETED, [10, 20, 30, 40])
    # The parent's journal: four starts, then each wait in argument order.
    assert kinds(p, "fan-1") == ["run.started"] + ["child.started"] * 4 + ["child.wait", "child.done"] * 4 + [
        "run.completed"
    ]
    assert [e.data["child"] for e in p.journal("fan-1") if e.kind.value == "child.done"] == children


def test_a_limit_runs_that_many_branches_at_a_time(p: Any) -> None:
    p.start("fan", {"items": waiting(5), "limit": 2}, id="fan-2")
    started = lambda: sorted(r.id for r in p.runs(workflow="item"))  # noqa: E731
    assert started() == ["fan-2.child-1", "fan-2.child-2"]
    p.signal("fan-2.child-2", "go", "ok")  # a later branch ending first starts nothing
    assert started() == ["fan-2.child-1", "fan-2.child-2"]
    p.signal("fan-2.child-1", "go", "ok")  # the first ends: the third starts, then the fourth
    assert started() == [f"fan-2.child-{i}" for i in range(1, 5)]
    for i in (3, 4):
        p.signal(f"fan-2.child-{i}", "go", "ok")
    assert started() == [f"fan-2.child-{i}" for i in range(1, 6)]
    p.signal("fan-2.child-5", "go", "ok")
    assert p.get("fan-2").result == [10, 20, 30, 40, 50]


def test_a_failed_branch_raises_after_the_others_settle(p: Any) -> None:
    items = [{"n": 1, "wait": True}, {"n": 2, "fail": True}, {"n": 3, "wait": True}]
    p.start("fan-caught", {"items": items}, id="fan-3")
    assert p.get("fan-3.child-2").status == Status.FAILED
    assert p.get("fan-3").status == Status.AWAITING, "the failure waits for the others"
    p.signal("fan-3.child-1", "go", "ok")
    assert p.get("fan-3").status == Status.AWAITING
    p.signal("fan-3.child-3", "go", "ok")
    got = p.get("fan-3").result
    [failed] = got["failed"]
    assert failed["branch"] == 2 and failed["child"] == "fan-3.child-2" and failed["status"] == "failed"
    assert "item 2 failed" in failed["message"]
    assert got["results"] == {"1": 10, "3": 30}  # JSON keeps a sparse array's positions as keys
    assert got["text"].startswith(
        "wf:map over workflow 'item': 1 of 3 branches failed; the first, 2, child 'fan-3.child-2' "
        "(workflow 'item') failed:"
    ), got["text"]


def test_an_uncaught_branch_failure_fails_the_run_with_its_text(p: Any) -> None:
    p.start("fan", {"items": [{"n": 1}, {"n": 2, "fail": True}]}, id="fan-4")
    run = p.get("fan-4")
    assert run.status == Status.FAILED
    assert run.error.startswith("wf:map over workflow 'item': 1 of 2 branches failed; the first, 2,"), (
        run.error
    )


def test_ids_may_be_chosen_per_item_and_a_workflow_handle_names_the_workflow(p: Any, ledger: Ledger) -> None:
    p.start("fan-named", {"items": [{"n": 7}, {"n": 8}]}, id="named")
    assert p.get("named").result == [70, 80]
    assert p.get("named-7").parent_id == "named" and p.get("named-8").parent_id == "named"
    assert ledger.effects == {"named-7/work/1/1": 7, "named-8/work/1/1": 8}


def test_all_of_waits_for_named_branches(p: Any) -> None:
    p.start("pair", {"wait": True}, id="pair-1")
    p.signal("pair-1-b", "go", "ok")
    assert p.get("pair-1").status == Status.AWAITING
    p.signal("pair-1-a", "go", "ok")
    assert p.get("pair-1").result == {"a": 10, "b": 20}


def test_all_of_raises_after_every_branch_settles(p: Any) -> None:
    p.start("pair", {"wait": True, "fail": False}, id="pair-2")
    p.signal("pair-2-b", "go", "fail")
    assert p.get("pair-2").status == Status.AWAITING
    p.signal("pair-2-a", "go", "ok")
    got = p.get("pair-2").result
    assert got["results"] == {"a": 10}
    assert [f["branch"] for f in got["failed"]] == ["b"]
    assert got["text"].startswith("wf:all_of: 1 of 2 branches failed; the first, b, child 'pair-2-b'")


def test_a_replay_after_a_restart_answers_the_same(p: Any) -> None:
    p.start("fan", {"items": waiting(3)}, id="fan-5")
    p.signal("fan-5.child-3", "go", "ok")
    p.restart()  # every in-memory coroutine dropped: the parent replays its journal
    p.signal("fan-5.child-1", "go", "ok")
    p.restart()
    p.signal("fan-5.child-2", "go", "ok")
    assert p.get("fan-5").result == [10, 20, 30]
    assert len(p.runs(workflow="item")) == 3, "a replay starts no branch twice"


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (
            "not_array",
            "wf:map(items, 'item'): items must be an array of inputs, one child run each (got string)",
        ),
        ("keyed", "wf:map(items, 'item'): items must be an array (keys 1..n); it has the key 'a'"),
        ("hole", "wf:map(items, 'item'): items must be an array (keys 1..n) with no holes; item 2 is nil"),
        (
            "too_many",
            "wf:map(items, 'item'): 1001 items, more than the 1000 branches one call may run; split the "
            "items over several calls, or map over runs that map (a tree of runs)",
        ),
        ("limit", "wf:map(items, 'item'): limit must be a whole number from 1 to 1000 (got 0)"),
        ("option", "wf:map(items, 'item'): unknown option 'limt'; the options are limit, timeout and id"),
        ("not_json", "the input of wf:map item 2 (workflow 'item')"),
        (
            "id_fn",
            "wf:map(items, 'item'): the id function returned number for item 1; it must return a run id",
        ),
        ("undeclared", "wf:child: workflow 'nope' is not declared in this project"),
        ("not_handles", "wf:all_of(branches): branch 'a' is function, not a child handle"),
    ],
)
def test_a_bad_call_is_refused_before_anything_is_journaled(p: Any, case: str, message: str) -> None:
    p.start("bad", case, id=f"bad-{case}")
    run = p.get(f"bad-{case}")
    assert run.status == Status.FAILED
    assert message in run.error, run.error
    assert kinds(p, f"bad-{case}") == ["run.started"], "nothing was journaled"
    assert p.runs(workflow="item") == [], "no branch was started"


def test_branches_effects_overlap_on_a_platform_with_several_workers(harness: Any, tmp_path: Path) -> None:
    """ "Their effects overlap in time": with four workers, the four branches' object calls
    are all under way at once (each waits at a barrier for the other three; one after
    another, the first would wait out the barrier's timeout and fail). On AWS the worker
    function advances one batch's wakes on threads, as the stack deploys it."""
    barrier = threading.Barrier(4, timeout=20)
    inside: list[int] = []

    def meet(cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        inside.append(args[0])
        barrier.wait()
        return [args[0]]

    with harness(PROJECT, data_dir=tmp_path, objects=meet, workers=4) as p:
        p.start("fan", {"items": [{"n": i} for i in range(1, 5)]}, id="together")
        run = p.get("together")
        assert (run.status, run.result) == (Status.COMPLETED, [10, 20, 30, 40]), run.error
        assert sorted(inside) == [1, 2, 3, 4]
        assert not barrier.broken


def test_with_one_worker_branches_run_one_after_another(harness: Any, tmp_path: Path) -> None:
    """The harnesses' default: woken runs advance one at a time, so a test's order of events
    is the order runs were woken (the barrier above would break here)."""
    order: list[str] = []

    def note(cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        order.append(f"in {args[0]}")
        order.append(f"out {args[0]}")
        return [args[0]]

    with harness(PROJECT, data_dir=tmp_path, objects=note) as p:
        p.start("fan", {"items": [{"n": i} for i in range(1, 4)]}, id="in-turn")
        assert p.get("in-turn").result == [10, 20, 30]
        assert order == ["in 1", "out 1", "in 2", "out 2", "in 3", "out 3"]


@pytest.mark.parametrize("workers", [0, 65, "2", True])
def test_a_harness_refuses_a_bad_workers_setting(harness: Any, tmp_path: Path, workers: Any) -> None:
    with pytest.raises(InvalidInput, match=r"workers must be a whole number from 1 to 64"):
        harness(PROJECT, data_dir=tmp_path, workers=workers)

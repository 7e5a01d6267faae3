"""Issue 27.1: child runs as journaled commands. ``wf:child`` starts (or joins) a run from
the workflow function, journaled once with no step; ``c:result()`` parks the parent until
the child ends and answers its result, or raises a catchable failure when the child
failed, was cancelled or the wait timed out. The child's end wakes the parent in the same
write. Both harnesses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Kind, Status
from runtime.errors import RunIdTaken

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "children"


@pytest.fixture
def p(harness: Any, tmp_path: Path):
    with harness(PROJECT, data_dir=tmp_path) as plat:
        yield plat


def kinds(p: Any, run_id: str) -> list[str]:
    return [e.kind.value for e in p.journal(run_id)]


def test_the_parent_parks_until_the_child_ends_and_gets_its_result(p: Any) -> None:
    parent = p.start("order", {"amount": 5, "child_id": "card-1"}, id="order-1")
    assert parent.status == Status.AWAITING
    assert parent.current_step == "child 'card-1'"
    child = p.get("card-1")
    assert child.parent_id == "order-1" and child.status == Status.AWAITING
    p.signal("card-1", "go", "ok")
    done = p.get("order-1")
    assert done.status == Status.COMPLETED
    assert done.result == {"ok": True, "child": "card-1", "result": {"charged": 5, "how": "ok"}}
    assert kinds(p, "order-1") == [
        "run.started",
        "child.started",
        "child.wait",
        "child.done",
        "run.completed",
    ]


def test_a_failed_child_raises_a_catchable_failure_in_the_parent(p: Any) -> None:
    p.start("order", {"amount": 5, "child_id": "card-2"}, id="order-2")
    p.signal("card-2", "go", "fail")
    assert p.get("card-2").status == Status.FAILED
    got = p.get("order-2")
    assert got.status == Status.COMPLETED
    assert got.result["ok"] is False and got.result["status"] == "failed"
    assert "card declined" in got.result["message"]
    assert got.result["text"].startswith("child 'card-2' (workflow 'charge-card') failed: step 'charge'")


def test_a_cancelled_child_raises_cancelled(p: Any) -> None:
    p.start("order", {"amount": 5, "child_id": "card-3"}, id="order-3")
    p.cancel("card-3")
    got = p.get("order-3").result
    assert got["ok"] is False and got["status"] == "cancelled"
    assert got["text"].startswith("child 'card-3' (workflow 'charge-card') was cancelled")


def test_the_wait_times_out_and_the_child_goes_on(p: Any) -> None:
    p.start("order", {"amount": 5, "child_id": "card-4", "timeout": "1h"}, id="order-4")
    p.advance("59m")
    assert p.get("order-4").status == Status.AWAITING
    p.advance("2m")
    got = p.get("order-4").result
    assert got["ok"] is False and got["status"] == "timeout"
    assert p.get("card-4").status == Status.AWAITING  # the child is not cancelled by the timeout


def test_an_uncaught_child_failure_fails_the_parent_with_its_text(p: Any) -> None:
    p.start("uncaught", {"child_id": "card-5"}, id="unc-5")
    p.signal("card-5", "go", "fail")
    run = p.get("unc-5")
    assert run.status == Status.FAILED
    assert run.error.startswith("child 'card-5' (workflow 'charge-card') failed: step 'charge'")


def test_cancelling_the_parent_cascades_to_the_child(p: Any) -> None:
    p.start("order", {"amount": 5, "child_id": "card-6"}, id="order-6")
    p.cancel("order-6")
    assert p.get("order-6").status == Status.CANCELLED
    assert p.get("card-6").status == Status.CANCELLED


def test_children_without_ids_get_ids_derived_from_the_parent_and_their_position(p: Any) -> None:
    run = p.start("fan", {"n": 3}, id="fan-1")
    assert run.status == Status.COMPLETED
    assert run.result == [{"id": f"fan-1.child-{i}", "result": {"echo": i}} for i in (1, 2, 3)]
    assert sorted(p.platform.store.children("fan-1")) == [f"fan-1.child-{i}" for i in (1, 2, 3)]


def test_a_child_id_that_exists_joins_the_run(p: Any) -> None:
    p.start("charge-card", {"amount": 9}, id="card-7")  # started outside, with its own input
    p.start("order", {"amount": 5, "child_id": "card-7"}, id="order-7")
    assert [e.data for e in p.journal("order-7") if e.kind == Kind.CHILD_STARTED] == [
        {"child": "card-7", "joined": True}
    ]
    p.signal("card-7", "go", "ok")
    # A joined run wakes its own parent (none here): the waiting parent reads it again each minute.
    p.advance("1m")
    assert p.get("order-7").result == {"ok": True, "child": "card-7", "result": {"charged": 9, "how": "ok"}}


def test_a_child_id_held_by_another_workflow_is_refused_and_nothing_is_journaled(p: Any) -> None:
    p.start("echo", "x", id="card-8")
    run = p.start("order", {"amount": 5, "child_id": "card-8"}, id="order-8")
    assert run.status == Status.FAILED
    assert "wf:child: " in run.error and "'echo'" in run.error and "'charge-card'" in run.error
    assert str(RunIdTaken("card-8", "echo", "charge-card")) in run.error
    assert kinds(p, "order-8") == ["run.started"]


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("unknown", "wf:child: workflow 'no-such-flow' is not declared in this project"),
        ("bad-id", "wf:child('echo'): run id must be a non-empty string without '/' (got \"a/b\")"),
        ("option", "wf:child('echo'): unknown option 'idd'; the options are id and timeout"),
        ("self", "wf:child: run 'bad-self' named itself as its child; a run cannot wait for its own end"),
    ],
)
def test_bad_input_is_refused_before_anything_is_journaled(p: Any, case: str, says: str) -> None:
    run = p.start("bad", {"case": case}, id=f"bad-{case}")
    assert run.status == Status.FAILED
    assert says in run.error
    assert kinds(p, f"bad-{case}") == ["run.started"]
    assert p.platform.store.children(f"bad-{case}") == []


def test_wf_child_inside_a_step_is_refused(p: Any) -> None:
    run = p.start("bad", {"case": "in-step"}, id="bad-step")
    assert "wf:child was called inside step 's'" in run.error
    assert Kind.CHILD_STARTED.value not in kinds(p, "bad-step")
    assert p.platform.store.children("bad-step") == []


def test_result_called_again_with_other_options_is_refused_and_with_the_same_answers_the_same(
    p: Any,
) -> None:
    run = p.start("bad", {"case": "twice"}, id="bad-twice")
    assert run.status == Status.FAILED
    assert "c:result() of child 'bad-twice.child-1' was called again with another timeout (1h, then 2h)" in (
        run.error
    )
    assert kinds(p, "bad-twice") == ["run.started", "child.started", "child.wait", "child.done"]
    same = p.start("bad", {"case": "same-twice"}, id="bad-same")
    assert same.result == [{"echo": 1}, {"echo": 1}]
    assert kinds(p, "bad-same").count("child.done") == 1


def test_replay_returns_the_recorded_result_without_reading_the_child(p: Any) -> None:
    p.start("order", {"amount": 5, "child_id": "card-9"}, id="order-9")
    p.signal("card-9", "go", "ok")
    before = p.journal("order-9")
    p.restart()
    verdict = p.platform.worker.executor.check(p.get("order-9"), p.platform.code)
    assert not verdict.diverges and verdict.message == "replays cleanly to its return"
    assert p.journal("order-9") == before


def test_a_parent_replayed_mid_wait_parks_again_and_is_woken_by_the_end(p: Any) -> None:
    p.start("order", {"amount": 5, "child_id": "card-10"}, id="order-10")
    p.restart()  # no cached coroutine: the parent replays its wait from the journal
    verdict = p.platform.worker.executor.check(p.get("order-10"), p.platform.code)
    assert verdict.message == "replays cleanly; parked at child 'card-10'"
    p.signal("card-10", "go", "ok")
    assert p.get("order-10").status == Status.COMPLETED


def test_children_past_the_per_run_limit_are_refused_and_nothing_is_journaled(
    p: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27, limits: children per run are bounded (runtime.platform.limits.MAX_CHILDREN_PER_RUN),
    refused at the call with what/rule/fix; the children before it stand. The bound is lowered
    here so the test starts three runs, not ten thousand."""
    from runtime.core import children

    monkeypatch.setattr(children, "MAX_CHILDREN_PER_RUN", 2)
    run = p.start("fan", {"n": 3}, id="many")
    assert run.status == Status.FAILED
    assert "run 'many' already called wf:child 2 times, the most a run may;" in run.error
    assert "start the rest from a child that starts them" in run.error
    assert sorted(p.platform.store.children("many")) == ["many.child-1", "many.child-2"]
    assert [e.data["child"] for e in p.journal("many") if e.kind == Kind.CHILD_STARTED] == [
        "many.child-1",
        "many.child-2",
    ]

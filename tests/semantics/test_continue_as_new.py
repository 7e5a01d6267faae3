"""Issue 27.3: continue-as-new. ``return wf:continue_as_new(state)`` closes the run's current
journal as a generation and starts the function again from the top with ``state`` as its
input, under the same run id; pending signals carry over and the journal limit applies per
generation. Both harnesses."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Kind, Status, generations

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "continue"


@pytest.fixture
def p(harness: Any, tmp_path: Path) -> Iterator[Any]:
    with harness(PROJECT, data_dir=tmp_path) as plat:
        yield plat


def test_each_month_is_a_generation_under_the_same_run_id(p: Any) -> None:
    p.start("subscription", {"customer": "ada", "months": 3}, id="sub-ada")
    p.signal("sub-ada", "renew", None)
    p.signal("sub-ada", "renew", None)
    done = p.get("sub-ada")
    assert done.status == Status.COMPLETED
    assert done.result == {"customer": "ada", "months_billed": 3, "ended_by": "term"}
    journal = p.journal("sub-ada")
    gens = generations(journal)
    assert [g["generation"] for g in gens] == [1, 2, 3]
    assert [g["ended"] for g in gens] == ["continued", "continued", None]
    assert gens[1]["input"] == {"customer": "ada", "months": 3, "month": 2}
    # Each generation bills once: the first generation's step never runs again.
    assert [e.kind for e in journal].count(Kind.STEP_RESULT) == 3


def test_signals_not_yet_consumed_carry_over(p: Any) -> None:
    p.start("subscription", {"customer": "bo", "months": 3}, id="sub-bo")
    # Two renewals arrive at once: the first ends generation 1, the second is consumed by 2.
    p.signal("sub-bo", "renew", None)
    p.signal("sub-bo", "renew", None)
    assert p.get("sub-bo").status == Status.COMPLETED
    assert p.get("sub-bo").result["months_billed"] == 3


def test_a_cancel_reaches_the_current_generation(p: Any) -> None:
    p.start("subscription", {"customer": "cy", "months": 12}, id="sub-cy")
    p.signal("sub-cy", "renew", None)
    p.cancel("sub-cy")
    assert p.get("sub-cy").status == Status.CANCELLED
    assert generations(p.journal("sub-cy"))[-1]["generation"] == 2


def test_a_function_in_the_state_is_refused_before_anything_is_journaled(p: Any) -> None:
    run = p.start("bad-continue", {"kind": "function"}, id="bad-1")
    assert run.status == Status.FAILED
    assert "the input of wf:continue_as_new" in (run.error or "")
    assert Kind.CONTINUED not in [e.kind for e in p.journal("bad-1")]


def test_a_state_over_256_kib_is_refused_before_anything_is_journaled(p: Any) -> None:
    run = p.start("bad-continue", {"kind": "big"}, id="bad-2")
    assert run.status == Status.FAILED
    assert "the input of wf:continue_as_new" in (run.error or "")
    assert Kind.CONTINUED not in [e.kind for e in p.journal("bad-2")]


def test_a_failed_later_generation_resumes_in_that_generation(p: Any) -> None:
    until = int(p.now) + 100
    run = p.start("flaky-later", {"until": until}, id="flaky-1")
    assert run.status == Status.FAILED and "not yet" in (run.error or "")
    p.advance("200s")
    p.resume("flaky-1")
    done = p.get("flaky-1")
    assert done.status == Status.COMPLETED and done.result == "done"
    gens = generations(p.journal("flaky-1"))
    assert [g["generation"] for g in gens] == [1, 2]


def test_a_call_inside_a_step_body_is_refused(p: Any) -> None:
    run = p.start("bad-continue", {"kind": "in-step"}, id="bad-3")
    assert run.status == Status.FAILED
    assert "wf:continue_as_new was called inside step 'inside'" in (run.error or "")
    assert Kind.CONTINUED not in [e.kind for e in p.journal("bad-3")]


def test_the_journal_keeps_the_last_generations_and_says_how_many_it_dropped(p: Any) -> None:
    """Issue 27's "generations kept": a run that continues 14 times keeps run.started and the
    entries of its last GENERATIONS_KEPT (10) generations; the others are dropped when a new
    one starts, and run:generations() counts them. The run goes on, and replays cold."""
    p.start("subscription", {"customer": "dee", "months": 20}, id="sub-dee")
    for _ in range(14):
        p.signal("sub-dee", "renew", None)
    journal = p.journal("sub-dee")
    assert journal[0].kind == Kind.STARTED and journal[0].seq == 1
    gens = generations(journal)
    assert [g["generation"] for g in gens] == list(range(6, 16))
    assert [e.kind for e in journal].count(Kind.STEP_RESULT) == 10
    assert journal[1].kind == Kind.CONTINUED and journal[1].data["generation"] == 6
    kept = p.platform.generations("sub-dee")
    assert (kept["current"], len(kept["earlier"]), kept["dropped"]) == (15, 9, 5)
    p.restart()  # a cold replay reads what is kept
    for _ in range(5):
        p.signal("sub-dee", "renew", None)
    done = p.get("sub-dee")
    assert done.result == {"customer": "dee", "months_billed": 20, "ended_by": "term"}
    assert [g["generation"] for g in generations(p.journal("sub-dee"))] == list(range(11, 21))


def test_a_derived_child_id_is_new_each_generation(p: Any) -> None:
    """Found by a review: derived child ids named the run but not the generation, so each
    later generation's first wf:child joined generation 1's ended child (its new input
    ignored) and got month 1's result again ('1 1 1'). Generation 1 keeps the id it always
    had; a later one's derived ids name it, as its step ids do."""
    p.start("monthly-child", {"month": 1, "months": 3}, id="mc")
    done = p.get("mc")
    assert done.status == Status.COMPLETED
    assert done.result == "1 2 3"
    bills = {r.id: r.input for r in p.runs(workflow="bill")}
    assert bills == {"mc.child-1": 1, "mc@2.child-1": 2, "mc@3.child-1": 3}
    assert sorted(p.platform.store.children("mc")) == ["mc.child-1", "mc@2.child-1", "mc@3.child-1"]
    started = [e.data["child"] for e in p.journal("mc") if e.kind == Kind.CHILD_STARTED]
    assert started == ["mc.child-1", "mc@2.child-1", "mc@3.child-1"]


def test_map_branches_are_new_each_generation_and_replay_cold(p: Any) -> None:
    p.start("monthly-map", {"month": 1, "months": 2}, id="mm")
    for i in (1, 2):
        p.signal(f"mm.child-{i}", "paid", None)
    assert p.get("mm").status != Status.COMPLETED
    assert generations(p.journal("mm"))[-1]["generation"] == 2
    p.restart()  # generation 2 replays cold from its journal, parked in the map
    for i in (1, 2):
        p.signal(f"mm@2.child-{i}", "paid", None)
    done = p.get("mm")
    assert done.status == Status.COMPLETED
    assert done.result == "11,12 21,22"
    bills = {r.id: r.input for r in p.runs(workflow="bill-paid")}
    assert bills == {"mm.child-1": 11, "mm.child-2": 12, "mm@2.child-1": 21, "mm@2.child-2": 22}

"""The replay core's child commands (runtime.core.children): pure, no store."""

from __future__ import annotations

from runtime.core import children
from runtime.core.child_commands import ChildCmd, ChildResultCmd, ChildState, ReadChild, StartChild
from runtime.core.ids import MAX_RUN_ID_BYTES, check_run_id, child_run_id
from runtime.core.journal import Entry, Kind, Status
from runtime.core.replay import Diverged, Park, Replay, Resume

START = Entry(1, Kind.STARTED, "parent", {"format": 1, "input": None}, 0.0)


def fresh(now_ms: int = 1_000) -> Replay:
    return Replay("p", [START], now_ms)


def test_a_derived_id_is_a_valid_run_id_even_for_the_longest_parent() -> None:
    assert child_run_id("order-1", 3) == "order-1.child-3"
    long = "x" * MAX_RUN_ID_BYTES
    derived = child_run_id(long, 12)
    assert check_run_id(derived) == derived and derived.endswith(".child-12")
    assert derived != child_run_id("y" * MAX_RUN_ID_BYTES, 12)


def test_a_new_child_is_started_before_anything_is_recorded_then_recorded_once() -> None:
    r = fresh()
    d = children.child(r, ChildCmd("charge", {"a": 1}, None))
    assert d == StartChild("charge", "p.child-1", {"a": 1}, None)
    assert r.take_unsaved() == []
    assert children.started(r, d, joined=False) == Resume({"child": "p.child-1", "workflow": "charge"})
    assert [(e.kind, e.data) for e in r.take_unsaved()] == [(Kind.CHILD_STARTED, {"child": "p.child-1"})]


def test_the_wait_parks_until_the_child_ends_then_records_its_end() -> None:
    r = fresh()
    children.started(r, StartChild("charge", "c", None, None), joined=False)
    read = children.result(r, ChildResultCmd("c", "charge", 5_000))
    assert read == ReadChild("c", "charge", 3)
    park = children.seen(r, read, ChildState("awaiting", parent_id="p"))
    assert park == Park(Status.AWAITING, 6_000, "child 'c'")
    again = r.redecide()
    assert again == read
    r.refresh(2_000, ())
    done = children.seen(r, read, ChildState("failed", error="boom", parent_id="p"))
    assert done == Resume({"child": "c", "by": "failed", "message": "boom"})
    assert [e.kind for e in r.take_unsaved()] == [Kind.CHILD_STARTED, Kind.CHILD_WAIT, Kind.CHILD_DONE]


def test_the_wait_times_out_at_its_due_time_and_a_foreign_child_is_read_again_each_minute() -> None:
    r = fresh()
    children.started(r, StartChild("charge", "c", None, None), joined=True)
    read = children.result(r, ChildResultCmd("c", "charge", None))
    assert isinstance(read, ReadChild)
    park = children.seen(r, read, ChildState("running", parent_id="someone-else"))
    assert park == Park(Status.AWAITING, 1_000 + children.FOREIGN_RECHECK_MS, "child 'c'")
    r2 = fresh()
    children.started(r2, StartChild("charge", "c", None, None), joined=False)
    read2 = children.result(r2, ChildResultCmd("c", "charge", 10))
    assert isinstance(read2, ReadChild)
    r2.refresh(1_010, ())
    assert children.seen(r2, read2, ChildState("running", parent_id="p")) == Resume(
        {"child": "c", "by": "timeout"}
    )


def test_replay_answers_from_the_journal_and_a_different_child_diverges() -> None:
    journal = [
        START,
        Entry(2, Kind.CHILD_STARTED, "charge", {"child": "c"}, 0.0),
        Entry(3, Kind.CHILD_WAIT, "charge", {"child": "c", "timeout_ms": None, "due_at": None}, 0.0),
        Entry(4, Kind.CHILD_DONE, "charge", {"child": "c", "by": "completed", "result": 7}, 0.0),
    ]
    r = Replay("p", journal, 0)
    assert children.child(r, ChildCmd("charge", None, "c")) == Resume({"child": "c", "workflow": "charge"})
    assert children.result(r, ChildResultCmd("c", "charge", None)) == Resume(
        {"child": "c", "by": "completed", "result": 7}
    )
    assert r.take_unsaved() == []
    other = Replay("p", journal, 0)
    d = children.child(other, ChildCmd("refund", None, "c"))
    assert isinstance(d, Diverged)
    assert (
        d.error == "journal divergence: expected child 'c' of workflow 'charge', code reached child 'c' "
        "of workflow 'refund'"
    )
    step_first = Replay("p", journal, 0)
    from runtime.core.replay import StepCmd

    d2 = step_first.step(StepCmd("charge", 1, 0, None))
    assert isinstance(d2, Diverged) and d2.expected == "child 'c' of workflow 'charge'"


def _second_generation(*recorded: Entry) -> list[Entry]:
    """A journal in generation 2: generation 1 started child 'p.child-1' and continued."""
    return [
        START,
        Entry(2, Kind.CHILD_STARTED, "charge", {"child": "p.child-1"}, 0.0),
        Entry(3, Kind.CONTINUED, None, {"format": 1, "generation": 2, "input": None}, 0.0),
        *recorded,
    ]


def test_generation_1_derives_the_ids_it_always_did_and_a_later_generation_names_itself() -> None:
    assert children.child(fresh(), ChildCmd("charge", None, None)) == StartChild(
        "charge", "p.child-1", None, None
    )
    r = Replay("p", _second_generation(), 0)
    assert children.child(r, ChildCmd("charge", 2, None)) == StartChild("charge", "p@2.child-1", 2, None)
    long = "x" * MAX_RUN_ID_BYTES
    first, later = child_run_id(long, 1), child_run_id(f"{long}@2", 1)
    assert check_run_id(later) == later and later != first


def test_a_later_generation_journaled_before_ids_named_it_replays_as_written() -> None:
    """Engines before this fix derived generation 2's first id as 'p.child-1' (joining
    generation 1's child): such a journal replays, and the calls it has not recorded get
    ids of their generation. Any other recorded id still diverges."""
    old = Entry(4, Kind.CHILD_STARTED, "charge", {"child": "p.child-1", "joined": True}, 0.0)
    r = Replay("p", _second_generation(old), 0)
    joined = children.child(r, ChildCmd("charge", 2, None))
    assert joined == Resume({"child": "p.child-1", "workflow": "charge"})
    assert children.child(r, ChildCmd("charge", 3, None)) == StartChild("charge", "p@2.child-2", 3, None)
    other = Entry(4, Kind.CHILD_STARTED, "charge", {"child": "p.child-9"}, 0.0)
    d = children.child(Replay("p", _second_generation(other), 0), ChildCmd("charge", 2, None))
    assert isinstance(d, Diverged) and d.expected == "child 'p.child-9' of workflow 'charge'"

"""Signal-with-start in the store contract: ``create_run`` with a first signal writes the
run, its first entry, its wake-up and the signal in one write, or nothing (issue 28.4)."""

from __future__ import annotations

from runtime.core.journal import Entry, Kind, Status
from runtime.core.values import MAX_VALUE_BYTES
from runtime.store.base import FirstSignal, RunRecord, Store
from tests.contract.test_store import new_run, started

BIG = "b" * (MAX_VALUE_BYTES - 2)  # a payload at the limit: DynamoDB keeps it in S3


def test_a_run_created_with_its_signal_holds_it_pending(store: Store) -> None:
    run, created = store.create_run(new_run(), started(), FirstSignal("paid", {"by": "ada"}, 100.0))
    assert created and run.journal_len == 1
    assert [e.kind for e in store.journal("r1")] == [Kind.STARTED]
    [pending] = store.pending_signals("r1")
    assert (pending.name, pending.payload, pending.at) == ("paid", {"by": "ada"}, 100.0)
    assert [w[0] for w in store.wakeups()] == ["r1"]
    assert store.signal_backlog("r1") == 1


def test_a_signal_sent_after_the_first_is_numbered_after_it(store: Store) -> None:
    store.create_run(new_run(), started(), FirstSignal("paid", 1, 100.0))
    second, live = store.add_signal("r1", "paid", 2, 101.0)
    pending = store.pending_signals("r1")
    assert live and [s.payload for s in pending] == [1, 2]
    assert pending[-1].id == second and pending[0].id < second


def test_creating_an_existing_run_with_a_signal_writes_neither(store: Store) -> None:
    store.create_run(new_run(), started())
    again, created = store.create_run(
        new_run(workflow="other"), started(), FirstSignal("paid", {"by": "bob"}, 101.0)
    )
    assert not created and again.workflow == "wf"
    assert store.signals("r1") == [] and len(store.journal("r1")) == 1


def test_a_first_signal_at_the_value_limit_reads_back(store: Store) -> None:
    run = RunRecord(id="big", workflow="wf", status=Status.RUNNING, input=BIG, created_at=1.0, updated_at=1.0)
    first = Entry(1, Kind.STARTED, "wf", {"format": 1, "input": BIG}, 1.0)
    store.create_run(run, first, FirstSignal("paid", BIG, 1.0))
    [pending] = store.pending_signals("big")
    assert pending.payload == BIG and store.get_run("big").input == BIG  # type: ignore[union-attr]

"""Issue 31 (one write per status change): a run's first journal entries after entry 1 live
on its run item, in its head (``runtime.store.dynamodb_chunks.HEAD``), so the write that
parks or ends a run carries its entries: one write where a chunk and a summary were two.

These tests drive the store as writers do (two stores are two containers), count the
requests each append sends, and read the table's items as they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.clock import FakeClock
from runtime.core.journal import Entry, Kind, Status
from runtime.errors import JournalConflict, NewerLayout
from runtime.store import dynamodb_append, dynamodb_reads
from runtime.store.base import RunRecord, RunUpdate, TimerSet
from runtime.store.dynamodb import TTL_ATTRIBUTE, DynamoDBStore
from runtime.store.dynamodb_chunks import (
    HEAD,
    HEAD_ITEM_BYTES,
    HEAD_LAYOUT,
    HEAD_OPEN,
    HEAD_SIGNAL_GROWTH,
)
from runtime.store.dynamodb_layout import LAYOUT_ATTR, run_key
from runtime.store.items import item_bytes
from runtime.testing import AwsPlatform
from tests.support.moto_table import partition_items, store_table

TABLE = "lunaflow"


@pytest.fixture
def db() -> Iterator[Any]:
    with store_table(TABLE) as client:
        yield client


def start(store: DynamoDBStore, run_id: str = "r1", data: Any = None) -> None:
    run = RunRecord(
        id=run_id, workflow="wf", status=Status.RUNNING, input=data, created_at=1.0, updated_at=1.0
    )
    store.create_run(run, Entry(1, Kind.STARTED, "wf", {"input": data}, 1.0))


def step(seq: int, name: str = "s", result: Any = "ok") -> list[Entry]:
    return [
        Entry(seq, Kind.STEP_INTENT, name, {"attempt": 1}, 2.0),
        Entry(seq + 1, Kind.STEP_RESULT, name, {"n": 1, "values": [result]}, 2.0),
    ]


def wait(seq: int) -> list[Entry]:
    return [Entry(seq, Kind.WAIT, "await", {"names": ["go"]}, 2.0)]


def ended(seq: int, result: Any) -> list[Entry]:
    return [Entry(seq, Kind.COMPLETED, None, {"result": result}, 3.0)]


def continued(seq: int) -> list[Entry]:
    return [Entry(seq, Kind.CONTINUED, None, {"generation": 2, "input": {}}, 3.0)]


PARK = RunUpdate(Status.AWAITING, "await")


def run_item(db: Any, run_id: str = "r1", table: str = TABLE) -> dict[str, Any]:
    item: dict[str, Any] = db.get_item(TableName=table, Key=run_key(run_id))["Item"]
    return item


def chunk_keys(db: Any, run_id: str = "r1") -> list[str]:
    return [i["sk"]["S"] for i in partition_items(db, TABLE, run_id, "J#")]


def seqs(store: DynamoDBStore, run_id: str = "r1") -> list[int]:
    return [e.seq for e in store.journal(run_id)]


class Writes:
    """The write requests a store's client sends, by operation."""

    def __init__(self, db: Any) -> None:
        self.ops: list[str] = []
        db.meta.events.register("before-call.dynamodb.*", self._seen)

    def _seen(self, model: Any, **_: Any) -> None:
        if model.name in {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}:
            self.ops.append(model.name)


def test_a_start_that_parks_writes_its_entries_and_its_park_in_one_write(db: Any) -> None:
    store = DynamoDBStore(db, TABLE)
    start(store)
    assert run_item(db)[LAYOUT_ATTR] == {"N": str(HEAD_LAYOUT)} and HEAD_OPEN in run_item(db)
    writes = Writes(db)
    store.append("r1", 1, wait(2), update=PARK, timer=TimerSet(None))
    assert writes.ops == ["UpdateItem"]  # was a chunk's PutItem and the summary's UpdateItem
    assert chunk_keys(db) == []
    cold = DynamoDBStore(db, TABLE)
    snap = cold.load("r1")
    assert snap is not None and [(e.seq, e.kind) for e in snap.journal] == [(1, Kind.STARTED), (2, Kind.WAIT)]
    run = cold.get_run("r1")
    assert run is not None and (run.status, run.journal_len) == (Status.AWAITING, 2)


def test_a_run_that_ends_in_its_head_ends_in_one_write_and_shows_its_result(db: Any) -> None:
    store = DynamoDBStore(db, TABLE)
    start(store)
    store.append("r1", 1, step(2))
    writes = Writes(db)
    store.append(
        "r1", 3, ended(4, {"total": 3}), update=RunUpdate(Status.COMPLETED, None), timer=TimerSet(None)
    )
    assert writes.ops == ["UpdateItem"]
    cold = DynamoDBStore(db, TABLE)
    snap = cold.load("r1")
    assert snap is not None
    for run in (cold.get_run("r1"), snap.run, *cold.list_runs(status=Status.COMPLETED)):
        assert run is not None and run.status == Status.COMPLETED and run.result == {"total": 3}
    assert seqs(cold) == [1, 2, 3, 4]


def test_two_writers_at_one_view_of_the_open_head_meet_on_its_last_entry(db: Any) -> None:
    a, b = DynamoDBStore(db, TABLE), DynamoDBStore(db, TABLE)
    start(a)
    assert a.load("r1") is not None and b.load("r1") is not None  # both read the journal at 1
    a.append("r1", 1, step(2, "a"))
    for entries, update in ((step(2, "b"), None), (wait(2), PARK), ([], PARK), (continued(2), None)):
        with pytest.raises(JournalConflict):
            b.append("r1", 1, entries, update=update)
    assert [e.name for e in DynamoDBStore(db, TABLE).journal("r1")][1:] == ["a", "a"]
    assert chunk_keys(db) == []


@pytest.mark.parametrize("first", ["head", "chunk"])
def test_a_writer_at_the_open_head_and_one_whose_entries_go_to_a_chunk_meet(db: Any, first: str) -> None:
    """A batch too large for the head closes it, conditional on the entry read, before it
    puts the chunk after it: whichever of the two writes first, the other one loses."""
    a, b = DynamoDBStore(db, TABLE), DynamoDBStore(db, TABLE)
    start(a)
    assert a.load("r1") is not None and b.load("r1") is not None
    small, large = step(2, "small"), step(2, "large", "x" * 2000)
    winner, loser = (a, b) if first == "head" else (b, a)
    winner.append("r1", 1, small if first == "head" else large)
    with pytest.raises(JournalConflict):
        loser.append("r1", 1, large if first == "head" else small)
    journal = DynamoDBStore(db, TABLE).journal("r1")
    assert [e.seq for e in journal] == [1, 2, 3]
    assert {e.name for e in journal[1:]} == {"small" if first == "head" else "large"}
    assert chunk_keys(db) == ([] if first == "head" else ["J#0000000002"])


def test_the_write_that_fills_the_head_closes_it_and_chunks_follow_it(db: Any) -> None:
    store = DynamoDBStore(db, TABLE)
    start(store)
    length = 1
    for i in range(12):
        store.append("r1", length, step(length + 1, f"step-{i}"))
        length += 2
    item = run_item(db)
    held = int(item["hl"]["N"])
    assert HEAD_OPEN not in item and 3 <= held < length  # closed, some steps in
    assert chunk_keys(db)[0] == f"J#{held + 1:010d}"
    # The item keeps room for what it may still gain (a signal, a lease, status texts): its
    # writes stay one write unit each.
    assert item_bytes(item) + HEAD_SIGNAL_GROWTH <= HEAD_ITEM_BYTES
    assert seqs(store) == seqs(DynamoDBStore(db, TABLE)) == list(range(1, length + 1))
    cold = DynamoDBStore(db, TABLE)
    assert cold.load("r1", after=held - 1) is not None  # an entry in the head, the rest chunks
    assert [e.seq for e in cold.load("r1", after=held - 1).journal] == list(  # type: ignore[union-attr]
        range(held, length + 1)
    )


def test_a_generation_closes_the_head_and_a_drop_takes_the_head_first(db: Any) -> None:
    store = DynamoDBStore(db, TABLE)
    start(store)
    store.append("r1", 1, step(2))
    store.append("r1", 3, continued(4), update=RunUpdate(Status.RUNNING, None))
    assert chunk_keys(db) == ["J#0000000004"] and HEAD_OPEN not in run_item(db)
    store.append("r1", 4, step(5, "g2"))
    store.drop_entries("r1", 4)
    assert HEAD not in run_item(db)
    snap = DynamoDBStore(db, TABLE).load("r1")
    assert snap is not None and [e.seq for e in snap.journal] == [1, 4, 5, 6]


def test_a_summary_alone_at_the_open_head_is_one_write_and_loses_to_an_append(db: Any) -> None:
    a, b = DynamoDBStore(db, TABLE), DynamoDBStore(db, TABLE)
    start(a)
    assert a.load("r1") is not None and b.load("r1") is not None
    writes = Writes(db)
    a.append("r1", 1, [], update=PARK)
    assert writes.ops == ["UpdateItem"]  # no transaction checking a chunk's key
    a.append("r1", 1, wait(2), update=PARK)
    with pytest.raises(JournalConflict):
        b.append("r1", 1, [], update=RunUpdate(Status.SLEEPING, "sleep"))
    assert DynamoDBStore(db, TABLE).get_run("r1").status == Status.AWAITING  # type: ignore[union-attr]


def test_a_signal_riding_on_the_run_item_keeps_the_head_layout(db: Any) -> None:
    store = DynamoDBStore(db, TABLE)
    start(store)
    store.append("r1", 1, wait(2), update=PARK)
    store.add_signal("r1", "go", {"i": 1}, 5.0)
    assert run_item(db)[LAYOUT_ATTR] == {"N": str(HEAD_LAYOUT)}
    snap = DynamoDBStore(db, TABLE).load("r1")
    assert snap is not None and [s.payload for s in snap.signals] == [{"i": 1}]


def test_code_from_before_the_head_refuses_a_run_with_one(db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Code of layout 2 (stop 61 and before) reads entry 1 and chunks: it would take a run
    whose entries 2 on are in its head for one with its entries dropped. Its layout check
    (``refuse_newer``, unchanged since stop 54) refuses the run instead, writing nothing."""
    store = DynamoDBStore(db, TABLE)
    start(store)
    store.append("r1", 1, wait(2), update=PARK)
    before = run_item(db)
    monkeypatch.setattr(dynamodb_reads, "LAYOUT", 2)
    older = DynamoDBStore(db, TABLE)
    with pytest.raises(NewerLayout):
        older.load("r1")
    with pytest.raises(NewerLayout):
        older.append("r1", 2, step(3))
    assert run_item(db) == before


def test_a_run_without_room_for_a_head_keeps_the_layout_older_code_reads(db: Any) -> None:
    store = DynamoDBStore(db, TABLE)
    start(store, data={"note": "x" * 320})  # inline, but the item leaves too little room
    assert HEAD_OPEN not in run_item(db) and run_item(db).get(LAYOUT_ATTR) == {"N": "1"}
    store.append("r1", 1, wait(2), update=PARK)
    assert chunk_keys(db) == ["J#0000000002"]
    assert seqs(DynamoDBStore(db, TABLE)) == [1, 2]


def test_a_run_that_ends_in_its_head_expires_by_ttl_whole() -> None:
    """No chunk to give an expiry: the end's one write gives the run item its TTL, the run
    is filed for no sweep, and once TTL deletes the item the id starts a new run."""
    with store_table(TABLE) as db:
        store = DynamoDBStore(db, TABLE, clock=FakeClock(1_000.5))
        store.retention_s = 2 * 86_400.0
        start(store)
        store.append("r1", 1, step(2))
        writes = Writes(db)
        store.append("r1", 3, ended(4, 7), update=RunUpdate(Status.COMPLETED, None), timer=TimerSet(None))
        assert writes.ops == ["UpdateItem"]
        item = run_item(db)
        assert TTL_ATTRIBUTE in item and "timer_pk" not in item and chunk_keys(db) == []
        db.delete_item(TableName=TABLE, Key=run_key("r1"))  # what TTL does
        assert store.get_run("r1") is None
        start(store)
        snap = DynamoDBStore(db, TABLE).load("r1")
        assert snap is not None and [e.seq for e in snap.journal] == [1]


def test_a_signal_on_a_run_without_a_head_marks_it_layout_2_only(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Code of layout 2 reads such a run: a signal riding on it must not mark it 3."""
    monkeypatch.setattr(dynamodb_append.Appends, "run_head", False)
    store = DynamoDBStore(db, TABLE)
    start(store)
    store.add_signal("r1", "go", 1, 2.0)
    assert run_item(db)[LAYOUT_ATTR] == {"N": "2"}


def test_runs_parked_without_a_head_are_served_to_their_end_by_code_with_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The upgrade: runs the code before the head started (``run_head`` off writes what it
    wrote, layout 2 at most) parked awaiting a signal, sleeping, mid-generation and with a
    step done, then served by this code (heads on) to their ends, next to new runs."""
    project = Path(__file__).resolve().parents[1] / "projects" / "aws_limits"
    with AwsPlatform(project, objects=lambda *a: ["through"]) as p:
        monkeypatch.setattr(dynamodb_append.Appends, "run_head", False)
        old = {
            "a1": p.start("approval", {}, id="a1").status,
            "n1": p.start("nap", {"sleep": "5m"}, id="n1").status,
            "c1": p.start("napcontinue", {}, id="c1").status,
            "h1": p.start("hold", {}, id="h1").status,
        }
        assert old == {"a1": "awaiting", "n1": "sleeping", "c1": "sleeping", "h1": "awaiting"}
        db, table = p.runtime.store._db, p.config.table
        assert all(HEAD_OPEN not in run_item(db, r, table) for r in old)
        monkeypatch.setattr(dynamodb_append.Appends, "run_head", True)
        assert p.start("approval", {}, id="a2").status == "awaiting"
        assert HEAD_OPEN in run_item(db, "a2", table)
        for run_id in ("a1", "a2", "h1"):
            assert p.signal(run_id, "go", {"by": run_id}) is True
        p.advance("10m")
        for run_id in ("a1", "a2"):
            assert (p.get(run_id).status, p.get(run_id).result) == ("completed", {"got": {"by": run_id}})
        assert p.get("h1").result == {"got": "through", "payload": {"by": "h1"}}
        assert (p.get("n1").result, p.get("c1").result) == ("rested", "through")
        assert HEAD in run_item(db, "a2", table) and HEAD not in run_item(db, "a1", table)

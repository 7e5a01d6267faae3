"""Issue 31: a run's first small signal rides on the write that numbers it.

Before, every signal was two writes (its number on the run item, then an item of its own,
``S#<n>``), a load at it read a second range for that item, and the run's expiry deleted
the item: 1 WRU a signal, 1 at the expiry and a Query more than the floor. Now the first
signal a run in flight is sent, when small, is recorded on the run item by its numbering
(``sigr``, with the number before it, ``sigr_n``) and the run item says the run needs run
layout 2 (``lv``), so code that does not look there refuses the run instead of misreading
it (``test_newer_layout.py``). Later signals, large ones and those an ended run is sent
are items as before, and every number has exactly one home.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.clock import FakeClock
from runtime.core.journal import Entry, Kind, Status
from runtime.platform.runs import Runs
from runtime.store.base import RunRecord, RunUpdate
from runtime.store.dynamodb import DynamoDBStore
from runtime.store.dynamodb_chunks import HEAD_LAYOUT
from runtime.store.dynamodb_layout import (
    LAYOUT_ATTR,
    RUN_SIGNAL,
    RUN_SIGNAL_BYTES,
    RUN_SIGNAL_N,
    RUN_SIGNAL_ROOM,
    SIGNAL_LAYOUT,
    run_key,
    run_pk,
)
from runtime.store.items import item_bytes, whole
from runtime.testing import AwsPlatform
from tests.support.moto_table import Requests, partition_items, store_table

TABLE = "lunaflow"
PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_limits"


@pytest.fixture
def db() -> Iterator[Any]:
    with store_table(TABLE) as client:
        yield client


def start(store: DynamoDBStore, run_id: str = "r1") -> None:
    run = RunRecord(
        id=run_id, workflow="wf", status=Status.AWAITING, input={}, created_at=1.0, updated_at=1.0
    )
    store.create_run(run, Entry(1, Kind.STARTED, "wf", {"input": {}}, 1.0))


def signal_items(db: Any, run_id: str) -> list[str]:
    return [i["sk"]["S"] for i in partition_items(db, TABLE, run_id, "S#")]


def the_run_item(db: Any, run_id: str) -> dict[str, Any]:
    item: dict[str, Any] = db.get_item(TableName=TABLE, Key=run_key(run_id), ConsistentRead=True)["Item"]
    return item


def consume(store: DynamoDBStore, run_id: str, signal_id: int, payload: Any) -> None:
    """Append the wait.done an activation writes for the signal (the run goes on waiting)."""
    snap = store.load(run_id)
    assert snap is not None
    length = snap.run.journal_len
    done = {"by": "signal", "signal": "go", "payload": payload, "signal_id": signal_id}
    store.append(
        run_id,
        length,
        [Entry(length + 1, Kind.WAIT_DONE, "await", done, 2.0)],
        update=RunUpdate(Status.AWAITING, "await"),
    )


def complete(store: DynamoDBStore, run_id: str = "r1") -> None:
    ended = [Entry(2, Kind.COMPLETED, "wf", {"result": 1}, 2.0)]
    store.append(run_id, 1, ended, update=RunUpdate(Status.COMPLETED, None))


def test_the_first_small_signal_is_one_write_and_is_read_with_the_run_item(db: Any) -> None:
    store = DynamoDBStore(db, TABLE)
    start(store)
    seen = Requests(db)
    assert store.add_signal("r1", "go", {"bid": 120}, 2.0) == (1, True)
    assert seen.ops == ["UpdateItem"]  # no item of its own
    item = the_run_item(db, "r1")
    assert signal_items(db, "r1") == []
    assert RUN_SIGNAL in item and whole(item[RUN_SIGNAL_N]) == 0
    # Code reading layout 1 refuses the run (this run has a head as well: layout 3).
    assert whole(item[LAYOUT_ATTR]) == HEAD_LAYOUT and SIGNAL_LAYOUT == 2
    # A fresh container's load reads the run, its journal and the signal in one Query.
    seen.ops.clear()
    snap = DynamoDBStore(db, TABLE).load("r1")
    assert snap is not None and seen.ops == ["Query"], seen.ops
    assert [(x.id, x.name, x.payload, x.at) for x in snap.signals] == [(1, "go", {"bid": 120}, 2.0)]
    # Consumed, its wait.done's payload is read from the run item by a cold replay.
    consume(store, "r1", 1, {"bid": 120})
    cold = DynamoDBStore(db, TABLE)
    snap = cold.load("r1")
    assert snap is not None and snap.signals == []
    [done] = [e for e in snap.journal if e.kind == Kind.WAIT_DONE]
    assert done.data["payload"] == {"bid": 120}
    assert [(x.id, x.state, x.payload) for x in cold.signals("r1")] == [(1, "consumed", {"bid": 120})]


def test_later_and_larger_signals_are_items_and_each_number_has_one_home(db: Any) -> None:
    store = DynamoDBStore(db, TABLE)
    start(store)
    large = {"text": "x" * RUN_SIGNAL_BYTES}
    assert store.add_signal("r1", "go", large, 2.0) == (1, True)  # too large: an item
    assert RUN_SIGNAL not in the_run_item(db, "r1")
    assert store.add_signal("r1", "go", {"n": 2}, 3.0) == (2, True)  # the first small one
    assert store.add_signal("r1", "go", {"n": 3}, 4.0) == (3, True)  # not the first: an item
    item = the_run_item(db, "r1")
    assert whole(item[RUN_SIGNAL_N]) + 1 == 2
    assert signal_items(db, "r1") == ["S#0000000001", "S#0000000003"]
    snap = DynamoDBStore(db, TABLE).load("r1")
    assert snap is not None
    assert [(x.id, x.payload) for x in snap.signals] == [(1, large), (2, {"n": 2}), (3, {"n": 3})]
    warm = store.load("r1", after=1)  # an activation with entry 1 cached
    assert warm is not None
    assert [(x.id, x.payload) for x in warm.signals] == [(1, large), (2, {"n": 2}), (3, {"n": 3})]
    # Consumed in order by warm activations, each reads the one it takes.
    for signal_id, payload in [(1, large), (2, {"n": 2})]:
        consume(store, "r1", signal_id, payload)
    snap = store.load("r1")
    assert snap is not None and [(x.id, x.payload) for x in snap.signals] == [(3, {"n": 3})]
    cold = DynamoDBStore(db, TABLE).load("r1")
    assert cold is not None
    assert [e.data["payload"] for e in cold.journal if e.kind == Kind.WAIT_DONE] == [large, {"n": 2}]


def test_a_signal_an_ended_run_is_sent_first_rides_too_and_reads_set_aside(db: Any) -> None:
    """An ended run never goes on, so its state is read from the run being ended, as any
    signal's: its first signal costs one write like a live run's (no condition on the
    status, whose failure DynamoDB would bill before an item's write)."""
    store = DynamoDBStore(db, TABLE)
    start(store)
    complete(store)
    seen = Requests(db)
    assert store.add_signal("r1", "go", {"late": True}, 3.0) == (1, False)
    assert seen.ops == ["UpdateItem"], seen.ops
    assert RUN_SIGNAL in the_run_item(db, "r1") and signal_items(db, "r1") == []
    assert [(x.id, x.state, x.payload) for x in store.signals("r1")] == [(1, "set_aside", {"late": True})]
    snap = DynamoDBStore(db, TABLE).load("r1")
    assert snap is not None and snap.signals == []


def test_a_failed_run_takes_its_signal_on_the_run_item_and_keeps_it_pending(db: Any) -> None:
    """A failed run is not ended (a resume goes on with it): its signal waits for it."""
    store = DynamoDBStore(db, TABLE)
    start(store)
    store.append(
        "r1",
        1,
        [Entry(2, Kind.STEP_FAILED, "s", {"message": "boom"}, 2.0)],
        update=RunUpdate(Status.FAILED, None),
    )
    assert store.add_signal("r1", "go", {"n": 1}, 3.0) == (1, True)
    assert RUN_SIGNAL in the_run_item(db, "r1") and signal_items(db, "r1") == []
    assert [(x.id, x.state) for x in store.signals("r1")] == [(1, "pending")]


def test_a_signal_with_start_is_one_put(db: Any) -> None:
    runs = Runs(DynamoDBStore(db, TABLE), FakeClock())
    seen = Requests(db)
    runs.start("inbox", None, id="b1", signal="go", payload={"n": 1})
    assert seen.ops == ["PutItem"], seen.ops  # was a two-item transaction (4 WRU)
    assert signal_items(db, "b1") == []
    assert [(x.id, x.name, x.payload) for x in runs.store.pending_signals("b1")] == [(1, "go", {"n": 1})]
    assert runs.signal("b1", "go", {"n": 2}) is True  # numbered 2, an item
    assert signal_items(db, "b1") == ["S#0000000002"]


def test_a_run_waiting_on_a_signal_on_its_run_item_gets_it_on_the_aws_platform() -> None:
    """End to end through the handlers: started, parked, signalled, completed; its signal
    never had an item."""
    with AwsPlatform(PROJECT, objects=lambda *a: ["through"], strict=False) as p:
        p.start("approval", {}, id="sr1")
        assert p.get("sr1").status == "awaiting"
        assert p.platform.signal("sr1", "go", {"by": "ada"}) is True
        p.settle()
        run = p.get("sr1")
        assert (run.status, run.result) == ("completed", {"got": {"by": "ada"}})
        db = p.clients.dynamodb
        items = db.query(
            TableName=p.config.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": run_pk("sr1")}},
            ConsistentRead=True,
        )["Items"]
        assert not [i for i in items if i["sk"]["S"].startswith("S#")]
        assert [(x.id, x.state) for x in p.platform.store.signals("sr1")] == [(1, "consumed")]


def test_a_retried_numbering_finds_its_own_record_after_another_send_between_its_attempts(db: Any) -> None:
    """botocore sends a numbering again when its answer is lost. If another sender numbered
    between the two attempts, the retry's own-write check on ``sig_wid`` no longer holds: it
    used to commit a second number, which no signal held (a number read as pending for
    ever, holding wake-ups back), and to answer that number for a signal that was number 1.
    The record's own id now refuses the retry and names the signal's number."""
    store = DynamoDBStore(db, TABLE)
    start(store)
    real = db.update_item
    sent: list[int] = []

    def lost_answer(**request: Any) -> Any:
        if not sent:
            sent.append(1)
            real(**request)  # commits; its answer is lost
            other = DynamoDBStore(db, TABLE)  # another sender numbers a large signal
            db.update_item = real
            try:
                assert other.add_signal("r1", "go", {"x": "y" * RUN_SIGNAL_BYTES}, 2.5) == (2, True)
            finally:
                db.update_item = lost_answer
        return real(**request)  # botocore sends it again

    db.update_item = lost_answer
    try:
        assert store.add_signal("r1", "go", {"mine": 1}, 2.0) == (1, True)
    finally:
        db.update_item = real
    assert whole(the_run_item(db, "r1")["signal_seq"]) == 2  # no second number
    snap = DynamoDBStore(db, TABLE).load("r1")
    assert snap is not None and [x.id for x in snap.signals] == [1, 2]


def test_a_late_signal_to_an_ended_run_that_holds_one_is_two_writes(db: Any) -> None:
    """The ended-run condition applies only while the record could still be set: a run that
    holds one lets the numbering through, and its item says set aside (no failed write
    first, which DynamoDB bills too)."""
    store = DynamoDBStore(db, TABLE)
    start(store)
    store.add_signal("r1", "go", {"i": 1}, 2.0)
    complete(store)
    seen = Requests(db)
    assert store.add_signal("r1", "go", {"late": True}, 3.0, max_backlog=1000) == (2, False)
    assert seen.ops == ["UpdateItem", "PutItem"], seen.ops
    assert [(x.id, x.state) for x in store.signals("r1")] == [(1, "set_aside"), (2, "set_aside")]


def test_a_run_item_created_without_room_for_one_takes_none_and_stays_under_1_kb(db: Any) -> None:
    """An input near the inline bound leaves no room for a record under 1 KB: the run item
    is created saying no signal rides on it (and layout 1, which older code reads), so its
    signals are items, and every write to it stays one unit."""
    store = DynamoDBStore(db, TABLE)
    run = RunRecord(id="r1", workflow="wf", status=Status.AWAITING, input={}, created_at=1.0, updated_at=1.0)
    store.create_run(run, Entry(1, Kind.STARTED, "wf", {"input": {"k": "v" * 250}}, 1.0))
    created = the_run_item(db, "r1")
    assert item_bytes(created) > RUN_SIGNAL_ROOM and RUN_SIGNAL in created
    assert store.add_signal("r1", "go", {"n": 1}, 2.0) == (1, True)
    item = the_run_item(db, "r1")
    assert item[RUN_SIGNAL] == {"M": {}} and whole(item[LAYOUT_ATTR]) == 1
    assert signal_items(db, "r1") == ["S#0000000001"]
    assert item_bytes(item) < 1024
    snap = DynamoDBStore(db, TABLE).load("r1")
    assert snap is not None and [(x.id, x.payload) for x in snap.signals] == [(1, {"n": 1})]


def test_a_retried_signal_with_start_finds_its_record_after_a_worker_rewrote_the_run_item(db: Any) -> None:
    """A small signal-with-start is one put, no longer a transaction whose client token made
    a retry idempotent. botocore retries a put whose answer was lost (after a 60 s read
    timeout, time enough for the reconciler to wake the run and a worker to consume the
    signal and rewrite the run item's ``wid``): the retry then found the run item without
    its ``wid``, took the start for a join of an existing run, and sent the signal again.
    The signal record, which no later write replaces, now says the put was its own."""
    runs = Runs(DynamoDBStore(db, TABLE), FakeClock())
    real = db.put_item
    sent: list[int] = []

    def lost_answer(**request: Any) -> Any:
        if not sent and request["Item"]["sk"]["S"] == "K":
            sent.append(1)
            real(**request)  # commits; its answer is lost
            worker = DynamoDBStore(db, TABLE)  # a worker consumes the signal and parks
            snap = worker.load("sws")
            assert snap is not None
            length, [sig] = snap.run.journal_len, snap.signals
            done = {"by": "signal", "signal": sig.name, "payload": sig.payload, "signal_id": sig.id}
            wait_done = Entry(length + 1, Kind.WAIT_DONE, "await", done, 2.0)
            worker.append("sws", length, [wait_done], update=RunUpdate(Status.AWAITING, "await"))
        return real(**request)  # botocore sends it again

    db.put_item = lost_answer
    try:
        runs.start("inbox", None, id="sws", signal="go", payload={"n": 1})
    finally:
        db.put_item = real
    assert sent
    assert whole(the_run_item(db, "sws")["signal_seq"]) == 1  # not sent again
    assert runs.store.pending_signals("sws") == []

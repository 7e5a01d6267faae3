"""Issue 16.2: consuming a signal costs O(1) reads however many came before.

On main, an activation with the journal cached read ``sk >= J#<n+1>``: the new entries,
the run item and every signal the run ever received, consumed or not, so the 300th
signal read 300 items. Consumed signals now leave that range: the run item names them
(``sig_done``) and the load reads only the pending ones (and, by key, any a new
wait.done cites). These tests drive the store as an activation does (load, append the
wait.done, park) and count the items DynamoDB returns.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from runtime.core.journal import Entry, Kind, Status
from runtime.errors import SignalBacklogFull
from runtime.store.base import RunRecord, RunUpdate
from runtime.store.dynamodb import DynamoDBStore
from tests.support.moto_table import store_table

TABLE = "lunaflow"
CONSUMED: dict[int, set[int]] = {}  # per store: what its session consumed (the replay's set)


class Reads:
    """Items returned by the store's reads (Query, GetItem, BatchGetItem)."""

    def __init__(self, client: Any) -> None:
        self.items = 0
        client.meta.events.register("after-call.dynamodb", self._count)

    def _count(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "Query":
            self.items += len(parsed.get("Items", []))
        elif model.name == "GetItem":
            self.items += 1 if "Item" in parsed else 0
        elif model.name == "BatchGetItem":
            self.items += sum(len(v) for v in parsed.get("Responses", {}).values())


@pytest.fixture
def db() -> Iterator[Any]:
    CONSUMED.clear()
    with store_table(TABLE) as client:
        yield client


def start(store: DynamoDBStore, run_id: str = "r1") -> int:
    run = RunRecord(id=run_id, workflow="wf", status="running", input={}, created_at=1.0, updated_at=1.0)
    store.create_run(run, Entry(1, Kind.STARTED, "wf", {"input": {}}, 1.0))
    snap = store.load(run_id)
    assert snap is not None
    return snap.run.journal_len


def consume(store: DynamoDBStore, run_id: str, length: int, name: str) -> tuple[int, Any]:
    """One warm activation: read what came since ``length``, consume the oldest pending
    signal called ``name`` not consumed yet (as the replay picks), park again; returns the
    new length and the payload."""
    snap = store.load(run_id, after=length)
    assert snap is not None
    seen = CONSUMED.setdefault(id(store), set())
    seen |= {int(e.data["signal_id"]) for e in snap.journal if e.kind == Kind.WAIT_DONE}
    sig = next(x for x in snap.signals if x.name == name and x.id not in seen)
    seen.add(sig.id)
    done = {"by": "signal", "signal": sig.name, "payload": sig.payload, "signal_id": sig.id}
    entries = [
        Entry(length + 1, Kind.WAIT_DONE, "await", done, 2.0),
        Entry(length + 2, Kind.WAIT, "await", {"names": [name], "due_at": None}, 2.0),
    ]
    store.append(run_id, length, entries, update=RunUpdate(Status.AWAITING, "await"))
    return length + 2, sig.payload


def test_the_300th_signal_reads_as_few_items_as_the_first(db: Any) -> None:
    store = DynamoDBStore(db, TABLE)
    reads = Reads(db)
    length = start(store)
    per_signal = []
    for i in range(1, 301):
        store.add_signal("r1", "go", {"i": i}, 2.0)
        before = reads.items
        length, payload = consume(store, "r1", length, "go")
        assert payload == {"i": i}
        per_signal.append(reads.items - before)
    # The chunk just written is read back, the run item, the one pending signal.
    assert per_signal[0] <= 3
    # Once the journal's last chunk grows in place it is read too: still the same count
    # (the first few signals' entries are on the run item, its head: one item fewer).
    assert max(per_signal) <= 3 and per_signal[-1] == per_signal[10], per_signal[::50]
    # A fresh container (no cache) replays the whole journal and still finds every payload.
    cold = DynamoDBStore(db, TABLE).load("r1")
    assert cold is not None and cold.signals == []
    got = [e.data["payload"]["i"] for e in cold.journal if e.kind == Kind.WAIT_DONE]
    assert got == list(range(1, 301))


def test_a_signal_never_waited_for_keeps_the_reads_bounded_and_stays_pending(db: Any) -> None:
    store = DynamoDBStore(db, TABLE)
    reads = Reads(db)
    length = start(store)
    store.add_signal("r1", "other", {"kept": True}, 2.0)  # never consumed: a gap below the rest
    per_signal = []
    for i in range(1, 101):
        store.add_signal("r1", "go", {"i": i}, 2.0)
        before = reads.items
        length, _ = consume(store, "r1", length, "go")
        per_signal.append(reads.items - before)
    assert max(per_signal) <= per_signal[0] + 1, per_signal[::20]
    pending = store.pending_signals("r1")
    assert [(x.id, x.name, x.payload) for x in pending] == [(1, "other", {"kept": True})]
    # Another container, its own session, picks the run up after the gap and consumes it.
    other = DynamoDBStore(db, TABLE)
    length, payload = consume(other, "r1", length, "other")
    assert payload == {"kept": True}
    assert store.pending_signals("r1") == []


def test_a_wait_done_written_elsewhere_brings_its_signal_by_key(db: Any) -> None:
    """Container A's session is cached at some length; container B consumes signals and
    moves ``sig_done`` past them; A's next load reads B's entries and their payloads."""
    a, b = DynamoDBStore(db, TABLE), DynamoDBStore(db, TABLE)
    length = start(a)
    a_len = length
    b.load("r1")
    for i in range(1, 4):
        b.add_signal("r1", "go", {"i": i}, 2.0)
        length, _ = consume(b, "r1", length, "go")
    snap = a.load("r1", after=a_len)
    assert snap is not None
    assert [e.data["payload"] for e in snap.journal if e.kind == Kind.WAIT_DONE] == [
        {"i": i} for i in (1, 2, 3)
    ]
    assert snap.signals == []


def test_signals_consumed_in_dropped_generations_stay_consumed(db: Any) -> None:
    """``wf:continue_as_new`` drops the chunks of generations past the kept ones, and with them
    the wait.done entries that consumed their signals. A fresh container's full load took
    those signals for pending again (the next wait would have been handed an old one), and the
    backlog bound counted them as unconsumed; the run item's ``sig_done`` names them."""
    store = DynamoDBStore(db, TABLE)
    length = start(store)
    for i in (1, 2):
        store.add_signal("r1", "go", {"i": i}, 2.0)
        length, payload = consume(store, "r1", length, "go")
        assert payload == {"i": i}
    store.drop_entries("r1", length + 1)  # every chunk after entry 1: both wait.dones gone
    cold = DynamoDBStore(db, TABLE)
    snap = cold.load("r1")
    assert snap is not None
    assert not any(e.kind == Kind.WAIT_DONE for e in snap.journal)
    assert snap.signals == []
    assert cold.pending_signals("r1") == []
    assert [x.state for x in cold.signals("r1")] == ["consumed", "consumed"]
    # Two signals ever sent, none pending: a bound of one still takes the next.
    signal_id, live = cold.add_signal("r1", "go", {"i": 3}, 3.0, max_backlog=1)
    assert (signal_id, live) == (3, True)
    with pytest.raises(SignalBacklogFull):
        cold.add_signal("r1", "go", {"i": 4}, 3.0, max_backlog=1)


def test_a_cold_load_reads_no_signal_of_a_dropped_generation(db: Any) -> None:
    """A long-lived run (continue_as_new) that consumed many signals: a fresh container's load
    read every signal item ever sent (the partition from J#1 on); it reads the kept journal,
    the run item and the pending signals."""
    store = DynamoDBStore(db, TABLE)
    reads = Reads(db)
    length = start(store)
    for i in range(1, 51):
        store.add_signal("r1", "go", {"i": i}, 2.0)
        length, _ = consume(store, "r1", length, "go")
    store.drop_entries("r1", length + 1)
    store.add_signal("r1", "go", {"i": 51}, 2.0)
    before = reads.items
    snap = DynamoDBStore(db, TABLE).load("r1")
    assert snap is not None
    assert [(x.id, x.payload) for x in snap.signals] == [(51, {"i": 51})]
    assert reads.items - before <= 3, reads.items - before  # the run item, the chunk left, signal 51

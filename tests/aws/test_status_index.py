"""Issue 31.2 ("Indexes"): a run in flight has one status index entry from its start to its
end.

On main the status index's key was the status: each move between running, sleeping and
awaiting was a delete and a put (2 index WRU), and every summary rewrote ``updated_at``,
which the index carries (1 more). A fan-out run (started, parked, signalled, one step,
ended) moved three times. Now every in-flight status shares ``STATUS#live``: the entry is
put at the start and moved once, at the end (or when the run fails); a summary writes
``changed_at``, which no index carries. A list of one in-flight status reads the live runs
and keeps that status's; the reconciler no longer lists running runs (the live partition
would be every parked run too): a running run's backstop is its wake-up, which
``release_wake`` now keeps while another worker holds a live lease.

Items older code wrote (``STATUS#<status>``, ``updated_at`` rewritten) are listed, healed
and advanced by the new code, which moves them on their next status change.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Entry, Kind, Status
from runtime.store import dynamodb_index
from runtime.store.base import Lease, RunRecord, RunUpdate
from runtime.store.dynamodb import RUN_SK, DynamoDBStore, run_pk, sharded
from runtime.testing import AwsPlatform
from tests.support.aws_items import run_item
from tests.support.moto_table import store_table
from tests.support.older_layout import written_by_older_code

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_statuses"
TABLE = "lunaflow"


@pytest.fixture
def p() -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT) as platform:
        yield platform


class StatusKeys:
    """The run item's status, status index key and ``updated_at`` after every write the
    platform's store makes (read by an unhooked client)."""

    def __init__(self, p: AwsPlatform, run_id: str) -> None:
        self.p, self.run_id = p, run_id
        self.admin = p.new_clients().dynamodb
        self.seen: list[tuple[str, str, str]] = []
        p.runtime.store._db.meta.events.register("after-call.dynamodb", self._after)

    def _after(self, model: Any, **_: Any) -> None:
        if model.name not in ("PutItem", "UpdateItem", "TransactWriteItems"):
            return
        item = self.admin.get_item(
            TableName=self.p.config.table,
            Key={"pk": {"S": run_pk(self.run_id)}, "sk": {"S": RUN_SK}},
            ConsistentRead=True,
        ).get("Item")
        if item is not None:
            row = (item["status"]["S"], item.get("status_pk", {}).get("S", ""), item["updated_at"]["N"])
            if not self.seen or self.seen[-1] != row:
                self.seen.append(row)


def test_a_run_in_flight_keeps_one_status_index_entry_until_it_ends(p: AwsPlatform) -> None:
    keys = StatusKeys(p, "w1")
    assert p.start("wait", "abc", id="w1").status == "awaiting"
    p.advance("5s")
    assert p.signal("w1", "go", {"by": "ann"}) is True
    run = p.get("w1")
    assert (run.status, run.result) == ("completed", {"got": {"by": "ann"}, "n": 3})
    statuses = [status for status, _, _ in keys.seen]
    assert {"running", "awaiting", "completed"} <= set(statuses), keys.seen
    index_keys = [key for _, key, _ in keys.seen]
    live = sharded("STATUS#live", "w1")
    # One entry while in flight, removed at the end (a completed run is in no status
    # partition): the only index writes a status change made.
    assert list(dict.fromkeys(index_keys)) == [live, ""], keys.seen
    # The carried updated_at is the start's; the run's changes are in changed_at.
    assert len({updated for _, _, updated in keys.seen}) == 1, keys.seen
    item = run_item(p, "w1")
    assert float(item["changed_at"]["N"]) > float(item["updated_at"]["N"])
    assert run.updated_at == float(item["changed_at"]["N"])


def test_lists_of_each_status_read_the_live_runs_and_keep_that_status(p: AwsPlatform) -> None:
    for i in range(3):
        p.start("wait", "x", id=f"w{i}")
        p.start("nap", None, id=f"n{i}")
        p.advance("1s")
    p.start("boom", None, id="b0")
    assert [r.id for r in p.runs(status="awaiting")] == ["w2", "w1", "w0"]
    assert [r.id for r in p.runs(status="sleeping")] == ["n2", "n1", "n0"]
    assert [r.id for r in p.runs(status="failed")] == ["b0"]
    assert p.runs(status="running") == []
    store = p.runtime.store
    assert [r.id for r in store.list_runs(status="sleeping", limit=2)] == ["n2", "n1"]
    assert sorted(r.id for r in store.in_flight_runs()) == ["b0", "n0", "n1", "n2", "w0", "w1", "w2"]


def test_runs_written_by_older_code_are_listed_healed_and_advanced(p: AwsPlatform) -> None:
    """The upgrade: a stack's runs parked by the code before this change, in every status,
    with one left running by a worker that died after dropping its wake-up (the case the
    reconciler's running list was for)."""
    with written_by_older_code():
        assert p.start("wait", "abcd", id="old-wait").status == "awaiting"
        assert p.start("nap", None, id="old-nap").status == "sleeping"
        assert p.start("boom", None, id="old-boom").status == "failed"
        assert p.start("wait", "ab", id="old-stuck").status == "awaiting"
        p.advance("1s")
    p.clients.dynamodb.update_item(
        TableName=p.config.table,
        Key={"pk": {"S": run_pk("old-stuck")}, "sk": {"S": RUN_SK}},
        UpdateExpression="SET #st = :running, status_pk = :key REMOVE wake_pk, wake_sk",
        ExpressionAttributeNames={"#st": "status"},
        ExpressionAttributeValues={
            ":running": {"S": "running"},
            ":key": {"S": sharded("STATUS#running", "old-stuck")},
        },
    )
    assert run_item(p, "old-wait")["status_pk"]["S"] == sharded("STATUS#awaiting", "old-wait")
    p.restart()  # the new code
    p.start("wait", "new", id="new-wait")
    assert [r.id for r in p.runs(status="awaiting")] == ["new-wait", "old-wait"]
    assert [r.id for r in p.runs(status="sleeping")] == ["old-nap"]
    assert [r.id for r in p.runs(status="failed")] == ["old-boom"]
    assert [r.id for r in p.runs(status="running")] == ["old-stuck"]
    assert sorted(r.id for r in p.runtime.store.in_flight_runs()) == [
        "new-wait",
        "old-boom",
        "old-nap",
        "old-stuck",
        "old-wait",
    ]
    # The stranded run is found by its legacy entry and woken: it replays and parks, moved
    # to the live partition by that park.
    p.advance("7m")  # STALE_RUNNING_S, and the reconcile after it
    assert p.get("old-stuck").status == "awaiting"
    assert run_item(p, "old-stuck")["status_pk"]["S"] == sharded("STATUS#live", "old-stuck")
    assert p.signal("old-wait", "go", 1) is True
    assert p.get("old-wait").result == {"got": 1, "n": 4}
    assert "status_pk" not in run_item(p, "old-wait")  # completed: out of the status index
    p.advance("1h")
    assert p.get("old-nap").result == "rested"
    assert sorted(r.id for r in p.runs(status="completed")) == ["old-nap", "old-wait"]


@pytest.fixture
def store() -> Iterator[DynamoDBStore]:
    with store_table(TABLE) as client:
        yield DynamoDBStore(client, TABLE)


def _new(store: DynamoDBStore, run_id: str, at: float) -> None:
    store.create_run(
        RunRecord(id=run_id, workflow="wf", status=Status.RUNNING, input={}, created_at=at, updated_at=at),
        Entry(1, Kind.STARTED, "wf", {"input": {}}, at),
    )


def test_a_list_of_a_rare_status_pages_past_the_runs_of_others(store: DynamoDBStore) -> None:
    for i in range(150):
        _new(store, f"a{i:03d}", 1_000.0 + i)
        status = Status.SLEEPING if i in (3, 70, 149) else Status.AWAITING
        store.append(f"a{i:03d}", 1, [], update=RunUpdate(status, "wait"))
    assert [r.id for r in store.list_runs(status="sleeping", limit=2)] == ["a149", "a070"]
    assert [r.id for r in store.list_runs(status="sleeping")] == ["a149", "a070", "a003"]
    assert len(store.list_runs(status="awaiting", limit=120)) == 120
    assert store.stale_running(10_000.0, 0) == []  # nothing older code wrote


def test_a_worker_whose_lease_was_taken_leaves_the_wake_up_it_served(store: DynamoDBStore) -> None:
    """A worker's lease lapsed mid-step and another took the run (the same wake token):
    the first one's release must not drop the wake-up the second is serving, or a second
    crash would leave the run running with nothing to wake it."""
    _new(store, "r1", 1_000.0)
    t = 5_000_000
    assert store.acquire_lease("r1", "a", t, 1_000) == Lease.OK
    token = store.lease_token("r1")
    assert token is not None
    assert store.acquire_lease("r1", "b", t + 2_000, 60_000) == Lease.OK  # a's lapsed
    store.release_lease("r1", "a")  # not a's any more: nothing happens
    store.clock.now = lambda: (t + 3_000) / 1000  # type: ignore[method-assign]
    assert store.release_wake("r1", token) is False
    assert "r1" in store.waiting(["r1"])
    store.release_lease("r1", "b")  # b is done
    assert store.release_wake("r1", token) is True
    assert store.waiting(["r1"]) == set()


def test_a_list_of_an_in_flight_status_looks_as_deep_as_its_bound(
    store: DynamoDBStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented bound (docs/reliability_limits.md): a list of one in-flight status
    looks through the newest LIST_SCAN runs in flight, however few match."""
    for i in range(150):
        _new(store, f"a{i:03d}", 1_000.0 + i)
        status = Status.SLEEPING if i in (3, 70, 149) else Status.AWAITING
        store.append(f"a{i:03d}", 1, [], update=RunUpdate(status, "wait"))
    monkeypatch.setattr(dynamodb_index, "LIST_SCAN", 100)  # a050 ... a149
    assert [r.id for r in store.list_runs(status="sleeping", limit=5)] == ["a149", "a070"]
    # A longer list looks as deep as it is long.
    assert [r.id for r in store.list_runs(status="sleeping", limit=150)] == ["a149", "a070", "a003"]
    assert len(store.in_flight_runs()) == 150  # the deploy gate's list has no such bound

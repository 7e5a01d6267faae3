"""Issue 16.1: no hot index partitions.

On main every run's index entries shared a handful of partition keys (``#RUNS``, ``#WAKE``,
``#TIMER``, ``STATUS#<status>``, ``WF#<workflow>``), each a single index partition (about
1,000 writes a second) with a time-ordered sort key DynamoDB cannot split; and every index
carried status, times and tokens, so most writes to a run item rewrote four to six index
entries. The keys are now sharded by a hash of the run id (read back by scatter-gather,
tests/contract's list tests) and the indexes carry keys only (the status index also the
reconciler's ``updated_at``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from runtime.core.journal import Entry, Kind, Status
from runtime.store.base import RunRecord, RunUpdate, TimerSet
from runtime.store.dynamodb import SHARDS, DynamoDBStore, run_key
from tests.support.moto_table import store_table
from tests.support.older_layout import written_by_older_code

TABLE = "lunaflow"
INDEX_KEYS = ("status_pk", "workflow_pk", "wake_pk", "timer_pk")  # new runs carry no all_pk (stop 47)


@pytest.fixture
def db() -> Iterator[Any]:
    with store_table(TABLE) as client:
        yield client


def test_runs_of_one_workflow_spread_over_every_shard_of_each_index_key(db: Any) -> None:
    store = DynamoDBStore(db, TABLE)
    keys: dict[str, set[str]] = {k: set() for k in INDEX_KEYS}
    for i in range(200):
        rid = f"r{i}"
        store.create_run(
            RunRecord(id=rid, workflow="wf", status="running", input={}, created_at=1.0, updated_at=1.0),
            Entry(1, Kind.STARTED, "wf", {"input": {}}, 1.0),
        )
        store.append(rid, 1, [], update=RunUpdate(Status.SLEEPING, "sleep"), timer=TimerSet(5_000))
        store.add_wakeup(rid)
        item = db.get_item(TableName=TABLE, Key=run_key(rid))["Item"]
        for k in INDEX_KEYS:
            keys[k].add(item[k]["S"])
    for k, seen in keys.items():
        assert len(seen) == SHARDS, (k, sorted(seen))


def test_indexes_carry_only_what_their_queries_read(db: Any) -> None:
    indexes = db.describe_table(TableName=TABLE)["Table"]["GlobalSecondaryIndexes"]
    carried = {i["IndexName"]: i["Projection"] for i in indexes}
    assert carried["by_status"] == {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["updated_at"]}
    for name in ("by_workflow", "by_parent", "all_runs", "timers", "wakes"):
        assert carried[name] == {"ProjectionType": "KEYS_ONLY"}, name


def test_the_reconciler_s_bounded_lists_take_the_oldest_across_shards(db: Any) -> None:
    store = DynamoDBStore(db, TABLE)
    ids = [f"w{i:02d}" for i in range(40)]
    with written_by_older_code():  # stale_running lists what older code wrote
        for i, rid in enumerate(ids):
            store.create_run(
                RunRecord(
                    id=rid, workflow="wf", status="running", input={}, created_at=1_000.0 + i, updated_at=1.0
                ),
                Entry(1, Kind.STARTED, "wf", {"input": {}}, 1_000.0 + i),
            )
    assert store.wakeups_older_than(1_100.0, limit=5) == ids[:5]
    assert store.stale_running(2.0, 0, limit=6) == ids[:6]
    for i, rid in enumerate(ids):
        store.append(rid, 1, [], update=RunUpdate(Status.SLEEPING, "sleep"), timer=TimerSet(100_000 - i))
    assert store.fire_due_timers(100_000 - 30, limit=3) == ["w39", "w38", "w37"]
    assert store.fire_due_timers(100_000 - 30) == [f"w{i}" for i in range(36, 29, -1)]

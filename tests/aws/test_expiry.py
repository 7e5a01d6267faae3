"""Retention on the DynamoDB table (runtime/store/dynamodb_expiry.py): what the contract
suite cannot see of it. The ended run is filed in the timers index under its own partition
(no timer fires it); its S3 objects go with it; a sweep cut short part-way is finished by the
next; a signal numbered between the sweep's read and its delete keeps the run, and its item
is deleted by the next sweep, so no item of the old run is left for a new one of its id."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from runtime.core.clock import FakeClock
from runtime.core.journal import Entry, Kind, Status
from runtime.errors import NoSuchRun
from runtime.store.base import RunRecord, RunUpdate
from runtime.store.blobs import Blobs, run_prefix
from runtime.store.dynamodb import DynamoDBStore, run_key, run_pk, table_definition

DAY = 86_400.0
BUCKET = "values"


@pytest.fixture
def world() -> Iterator[tuple[DynamoDBStore, Any, FakeClock]]:
    os.environ.setdefault("AWS_DEFAULT_REGION", "eu-west-1")
    with mock_aws():
        db = boto3.client("dynamodb", region_name="eu-west-1")
        db.create_table(**table_definition("t"))
        s3 = boto3.client("s3", region_name="eu-west-1")
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        clock = FakeClock(1_000.0)
        store = DynamoDBStore(db, "t", clock=clock, blobs=Blobs(s3, BUCKET))
        store.retention_s = DAY
        store.ttl_runs = False  # the sweep's own rules: runs TTL deletes are test_ttl_expiry's
        yield store, s3, clock


def ended_run(store: DynamoDBStore, run_id: str, *, big: bool = False) -> None:
    at = store.clock.now()
    record = RunRecord(run_id, "wf", Status.RUNNING, {"x": 1}, created_at=at, updated_at=at)
    store.create_run(record, Entry(1, Kind.STARTED, "wf", {"format": 1, "input": {"x": 1}}, at))
    store.add_signal(run_id, "go", "y" * (400_000 if big else 10), at)
    value = "x" * (100_000 if big else 10)
    store.append(
        run_id,
        1,
        [Entry(2, Kind.STEP_RESULT, "s", {"n": 1, "values": [value]}, at)],
    )
    store.append(
        run_id,
        2,
        [Entry(3, Kind.COMPLETED, None, {"result": value}, at)],
        update=RunUpdate(Status.COMPLETED, None, result=value),
    )


def partition(store: DynamoDBStore, run_id: str) -> list[str]:
    items = store._db.query(
        TableName="t",
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": run_pk(run_id)}},
        ConsistentRead=True,
    )["Items"]
    return [i["sk"]["S"] for i in items]


def objects(s3: Any, run_id: str) -> list[str]:
    found = s3.list_objects_v2(Bucket=BUCKET, Prefix=run_prefix(run_id)).get("Contents", [])
    return [o["Key"] for o in found]


def test_an_expiring_run_is_filed_apart_from_timers_and_no_timer_sweep_fires_it(world: Any) -> None:
    store, _, clock = world
    ended_run(store, "r1")
    item = store._db.get_item(TableName="t", Key=run_key("r1"))["Item"]
    assert item["timer_pk"]["S"].startswith("#EXPIRE#") and "timer_due" not in item
    clock.advance(2 * DAY)
    assert store.fire_due_timers(int(clock.now() * 1000)) == []
    assert store.next_due() is None
    assert store.get_run("r1") is not None


def test_the_runs_s3_objects_are_deleted_with_it(world: Any) -> None:
    store, s3, clock = world
    ended_run(store, "big", big=True)
    assert len(objects(s3, "big")) >= 3  # the signal, the chunk, the result's text
    clock.advance(DAY + 1)
    assert store.expire(clock.now()) == ["big"]
    assert partition(store, "big") == [] and objects(s3, "big") == []


def test_a_sweep_that_dies_after_its_mark_is_finished_by_the_next_and_refuses_signals_meanwhile(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _, clock = world
    ended_run(store, "r1")
    clock.advance(DAY + 1)
    real_delete = store._delete_items

    def dies(items: list[dict[str, Any]]) -> None:
        real_delete(items[:1])  # one item gone, then the process ends
        raise Paused

    monkeypatch.setattr(store, "_delete_items", dies)
    with pytest.raises(Paused):
        store.expire(clock.now())
    monkeypatch.setattr(store, "_delete_items", real_delete)
    assert "K" in partition(store, "r1")
    with pytest.raises(NoSuchRun):  # marked: a signal's item is no longer written
        store.add_signal("r1", "late", 1, clock.now())
    assert store.expire(clock.now()) == ["r1"]
    assert partition(store, "r1") == []


def test_a_signal_that_lands_between_the_sweeps_read_and_its_mark_is_deleted_with_the_run(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep read the run item before the signal was numbered and its item written: the
    mark holds (it checks the expiry, not the signal count), and the partition read after
    the mark has the signal's item, which goes with the run."""
    store, _, clock = world
    ended_run(store, "r1")
    clock.advance(DAY + 1)
    real_mark = store._mark

    def signalled_first(run_id: str, item: dict[str, Any]) -> bool:
        assert store.add_signal("r1", "late", 1, clock.now()) == (2, False)  # set aside
        return bool(real_mark(run_id, item))

    monkeypatch.setattr(store, "_mark", signalled_first)
    assert store.expire(clock.now()) == ["r1"]
    assert partition(store, "r1") == []


def test_a_signal_whose_run_is_deleted_between_its_number_and_its_item_leaves_no_item(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep read the run after the signal was numbered and before its item was written:
    the run item goes, and the signal's item, written only with the run item there, is
    refused, so nothing of the old run is left for a new run of its id."""
    store, _, clock = world
    ended_run(store, "r1")
    clock.advance(DAY + 1)
    real = store._signal_item

    def numbered_then_swept(*args: Any, **kwargs: Any) -> Any:
        assert store.expire(clock.now()) == ["r1"]  # between the numbering and the item
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "_signal_item", numbered_then_swept)
    with pytest.raises(NoSuchRun):
        store.add_signal("r1", "late", 1, clock.now())
    assert partition(store, "r1") == []


class Paused(Exception):
    """The process stopped here (a sender between a signal's numbering and its item's
    write, or a sweep part-way)."""


def numbered_with_its_item_held(
    store: DynamoDBStore, monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> dict[str, Any]:
    """Send a signal to r1 whose sender stops after its numbering: returns the item's write
    (a TransactWriteItems request), not sent."""
    real_transact = store._db.transact_write_items
    held: list[dict[str, Any]] = []

    def pause(**request: Any) -> Any:
        held.append(request)
        raise Paused

    monkeypatch.setattr(store._db, "transact_write_items", pause)
    with pytest.raises(Paused):
        store.add_signal("r1", "late", 1, clock.now())
    monkeypatch.setattr(store._db, "transact_write_items", real_transact)
    return held[0]


def test_a_signal_numbered_before_the_sweep_whose_item_comes_after_the_mark_is_refused(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Numbered before the sweep reads the run; its item's write held back until the sweep
    has marked the run: the write is refused, and nothing of the old run is left for a new
    run of its id."""
    store, _, clock = world
    ended_run(store, "r1")
    clock.advance(DAY + 1)
    real_transact = store._db.transact_write_items
    held = numbered_with_its_item_held(store, monkeypatch, clock)
    real_delete = store._delete_items
    refused: list[str] = []

    def item_comes_after_the_mark(items: list[dict[str, Any]]) -> None:
        if not refused:
            with pytest.raises(ClientError) as e:
                real_transact(**held)
            refused.append(e.value.response["Error"]["Code"])
        real_delete(items)

    monkeypatch.setattr(store, "_delete_items", item_comes_after_the_mark)
    assert store.expire(clock.now()) == ["r1"]
    assert refused == ["TransactionCanceledException"] and partition(store, "r1") == []


def test_a_signal_item_numbered_on_a_deleted_run_is_refused_by_a_new_run_of_its_id(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The item's write checks the run item it was numbered on (the same start), not just a
    run item: a new run of the id started meanwhile gets no phantom signal."""
    store, _, clock = world
    ended_run(store, "r1")
    clock.advance(DAY + 1)
    real_transact = store._db.transact_write_items
    held = numbered_with_its_item_held(store, monkeypatch, clock)
    assert store.expire(clock.now()) == ["r1"]
    at = clock.now()
    store.create_run(
        RunRecord("r1", "wf", Status.RUNNING, {"x": 2}, created_at=at, updated_at=at),
        Entry(1, Kind.STARTED, "wf", {"format": 1, "input": {"x": 2}}, at),
    )
    with pytest.raises(ClientError) as refused:
        real_transact(**held)
    assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert not [sk for sk in partition(store, "r1") if sk.startswith("S#")]
    assert store.pending_signals("r1") == []

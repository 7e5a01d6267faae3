"""Runs that DynamoDB's TTL deletes (runtime/store/dynamodb_ttl.py): a run whose partition at
its end is its run item and one chunk gets ``expires_at`` from the end's own two writes and
is never filed for the sweep; every other run is swept as before. TTL deletes in any order
and late, so readers take a run item past its expiry as deleted, and drop what an earlier
run of the id left: each order of deletion is played here, as moto does not play TTL."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import pytest

from runtime.core.clock import FakeClock
from runtime.core.journal import Entry, Kind, Status
from runtime.errors import JournalConflict, NoSuchRun
from runtime.store import dynamodb_index
from runtime.store.base import RunRecord, RunUpdate
from runtime.store.dynamodb import TTL_ATTRIBUTE, DynamoDBStore, run_key, run_pk
from runtime.store.dynamodb_ttl import CHUNK_SLACK_S, MAX_CHUNKS, START_ATTR, start_of
from tests.support.moto_table import Requests, store_table

# The chunks' own rules (a run with a head meets them past it: tests/aws/test_journal_head.py).
pytestmark = pytest.mark.usefixtures("no_head")

DAY = 86_400.0
RETENTION_PROJECT = Path(__file__).resolve().parents[1] / "projects" / "retention"


@pytest.fixture
def store() -> Iterator[DynamoDBStore]:
    with store_table("t") as db:
        store = DynamoDBStore(db, "t", clock=FakeClock(1_000.5))
        store.retention_s = 2 * DAY
        yield store


class Crash(Exception):
    """The process dies (here: as it would send the run item's summary)."""


@contextmanager
def dying_before_the_summary(store: DynamoDBStore) -> Iterator[None]:
    """The process dies as it would write a summary on the run item: what ran before stays."""

    def crash(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key", {}).get("sk", {}).get("S") == "K" and "summary_at" in params.get(
            "UpdateExpression", ""
        ):
            raise Crash()

    store._db.meta.events.register("before-parameter-build.dynamodb.UpdateItem", crash, unique_id="crash")
    try:
        with pytest.raises(Crash):
            yield
    finally:
        store._db.meta.events.unregister("before-parameter-build.dynamodb.UpdateItem", unique_id="crash")


def later(store: DynamoDBStore, seconds: float) -> None:
    cast(FakeClock, store.clock).advance(seconds)


def start(store: DynamoDBStore, run_id: str = "r1", value: str = "a") -> None:
    at = store.clock.now()
    record = RunRecord(run_id, "wf", Status.RUNNING, {"v": value}, created_at=at, updated_at=at)
    store.create_run(record, Entry(1, Kind.STARTED, "wf", {"format": 1, "input": {"v": value}}, at))


def finish(
    store: DynamoDBStore, run_id: str = "r1", result: Any = "done", *, steps: int = 1, seq: int = 1
) -> None:
    """A step per ``steps`` (intent and result), then the end; ``seq``: the journal's length."""
    at = store.clock.now()
    for i in range(steps):
        store.append(
            run_id,
            seq,
            [Entry(seq + 1, Kind.STEP_INTENT, f"s{i}", {"pass": 1, "attempt": 1}, at)],
            update=RunUpdate(Status.RUNNING, f"s{i}"),
        )
        store.append(
            run_id, seq + 1, [Entry(seq + 2, Kind.STEP_RESULT, f"s{i}", {"n": 1, "values": [i]}, at)]
        )
        seq += 2
    store.append(
        run_id,
        seq,
        [Entry(seq + 1, Kind.COMPLETED, None, {"result": result}, at)],
        update=RunUpdate(Status.COMPLETED, None, result=result),
    )


def items(store: DynamoDBStore, run_id: str = "r1") -> dict[str, dict[str, Any]]:
    found = store._db.query(
        TableName=store.table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": run_pk(run_id)}},
        ConsistentRead=True,
    )["Items"]
    return {i["sk"]["S"]: i for i in found}


def number_a_signal(store: DynamoDBStore) -> None:
    """A sender's first write alone: the signal's number on the run item, its item not yet
    written."""
    store._db.update_item(
        TableName="t",
        Key=run_key("r1"),
        UpdateExpression="ADD signal_seq :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )


def ttl_deletes(store: DynamoDBStore, keep: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """DynamoDB's TTL: delete the expired items of every run (but the sort keys in ``keep``),
    in a random order."""
    now = store.clock.now()
    gone = [
        (i["pk"], i["sk"])
        for i in store._db.scan(TableName="t")["Items"]
        if TTL_ATTRIBUTE in i and float(i[TTL_ATTRIBUTE]["N"]) <= now and i["sk"]["S"] not in keep
    ]
    random.shuffle(gone)
    for pk, sk in gone:
        store._db.delete_item(TableName="t", Key={"pk": pk, "sk": sk})
    return [sk["S"] for _, sk in gone]


def swept_whole(store: DynamoDBStore) -> None:
    """The run completed without a TTL, filed for the sweep, which deletes it whole."""
    run_item = items(store)["K"]
    assert run_item["status"]["S"] == Status.COMPLETED and TTL_ATTRIBUTE not in run_item
    assert run_item["timer_pk"]["S"].startswith("#EXPIRE")
    later(store, 2 * DAY + 1)
    assert store.expire(store.clock.now()) == ["r1"] and items(store) == {}


def test_a_run_of_one_chunk_gets_its_expiry_from_its_end_and_is_never_filed_for_the_sweep(
    store: DynamoDBStore,
) -> None:
    start(store)
    requests = Requests(store._db)
    finish(store)
    ops = requests.take()
    end = ops[ops.index("Query") :]  # the end: its reads, then its chunk and its summary
    assert [op for op in end if op != "Query"] == ["UpdateItem", "UpdateItem"]
    run_item, chunk = items(store)["K"], items(store)["J#0000000002"]
    expiry = 1_000.5 + 2 * DAY
    assert int(run_item[TTL_ATTRIBUTE]["N"]) == int(expiry) + 1  # whole seconds, never early
    assert int(run_item["expires_ms"]["N"]) == int(expiry * 1000)
    assert "timer_pk" not in run_item and "timer_sk" not in run_item  # no sweep entry
    assert int(chunk[TTL_ATTRIBUTE]["N"]) == int(expiry) + 1 + int(CHUNK_SLACK_S)
    assert chunk[START_ATTR] == start_of(run_item["created_sk"]["S"]) == {"N": "1000.500000"}
    assert store.get_run("r1").expires_at == pytest.approx(expiry)  # type: ignore[union-attr]
    later(store, 2 * DAY + 10)
    requests.take()
    assert store.expire(store.clock.now()) == []
    assert "DeleteItem" not in requests.take() and set(items(store)) == {"K", "J#0000000002"}


def test_a_run_past_its_expiry_reads_as_deleted_before_ttl_deletes_it(store: DynamoDBStore) -> None:
    start(store)
    finish(store)
    later(store, 2 * DAY - 1)
    assert store.get_run("r1") is not None and len(store.journal("r1")) == 4
    later(store, 2)
    assert store.get_run("r1") is None
    assert store.load("r1") is None and store.journal("r1") == []
    assert store.signals("r1") == []
    assert "r1" not in [r.id for r in store.list_runs()]
    assert "r1" not in [r.id for r in store.list_runs(status=Status.COMPLETED)]
    with pytest.raises(NoSuchRun):
        store.add_signal("r1", "go", 1, store.clock.now())
    assert "sigr" not in items(store)["K"] or "name" not in items(store)["K"]["sigr"]["M"]


@pytest.mark.parametrize("left", ["nothing deleted", "run item only", "chunk only", "all"])
def test_a_new_run_of_the_id_never_reads_what_the_old_one_left_in_any_order_of_deletion(
    store: DynamoDBStore, left: str
) -> None:
    start(store, value="old")
    finish(store, result="old", steps=2)
    store.add_signal("r1", "late", "z" * 500, store.clock.now())  # set aside: an item of its own
    assert TTL_ATTRIBUTE in items(store)["S#0000000001"] and START_ATTR in items(store)["S#0000000001"]
    later(store, 2 * DAY + CHUNK_SLACK_S + 10)
    keep = {
        "nothing deleted": {"K", "J#0000000002", "S#0000000001"},
        "run item only": {"J#0000000002", "S#0000000001"},
        "chunk only": {"K", "S#0000000001"},
        "all": set(),
    }[left]
    ttl_deletes(store, keep)
    later(store, 1)
    start(store, value="new")
    assert store.journal("r1")[0].data["input"] == {"v": "new"} and len(store.journal("r1")) == 1
    assert store.signals("r1") == [] and store.pending_signals("r1") == []
    finish(store, result="new")
    assert [e.kind for e in store.journal("r1")] == [
        Kind.STARTED,
        Kind.STEP_INTENT,
        Kind.STEP_RESULT,
        Kind.COMPLETED,
    ]
    assert store.get_run("r1").result == "new"  # type: ignore[union-attr]
    store.add_signal("r1", "first", "y" * 500, store.clock.now())
    assert [x.name for x in store.signals("r1")] == ["first"]


def test_a_start_over_a_run_item_past_its_expiry_makes_a_new_run(store: DynamoDBStore) -> None:
    start(store, value="old")
    finish(store, result="old")
    again = RunRecord("r1", "wf", Status.RUNNING, {"v": "x"}, created_at=2_000.0, updated_at=2_000.0)
    joined, created = store.create_run(
        again, Entry(1, Kind.STARTED, "wf", {"format": 1, "input": {}}, 2_000.0)
    )
    assert not created and joined.result == "old"  # kept: the start joins it
    later(store, 2 * DAY + 1)
    start(store, value="new")
    assert store.get_run("r1").input == {"v": "new"}  # type: ignore[union-attr]
    assert TTL_ATTRIBUTE not in items(store)["K"]


def chunks(store: DynamoDBStore, run_id: str = "r1") -> list[str]:
    return sorted(k for k in items(store, run_id) if k.startswith("J#"))


def journal_past_the_ends_read(store: DynamoDBStore) -> None:
    steps = 0
    while len(chunks(store)) <= MAX_CHUNKS:
        step(store, 1 + 2 * steps, steps)
        steps += 1
    finish(store, steps=0, seq=1 + 2 * steps)


def step(store: DynamoDBStore, seq: int, i: int, kind: Kind = Kind.STEP_INTENT) -> None:
    at = store.clock.now()
    store.append("r1", seq, [Entry(seq + 1, kind, f"s{i}", {"pass": 1, "attempt": 1}, at)])
    store.append("r1", seq + 1, [Entry(seq + 2, Kind.STEP_RESULT, f"s{i}", {"n": 1, "values": [i]}, at)])


def an_earlier_chunk_of_older_code(store: DynamoDBStore) -> None:
    """A chunk written before stop 50 carries no start, which the write giving it a TTL
    would hold on."""
    for i in range(12):
        step(store, 1 + 2 * i, i)
    assert len(chunks(store)) == 2
    store._db.update_item(
        TableName="t",
        Key={"pk": {"S": run_pk("r1")}, "sk": {"S": "J#0000000002"}},
        UpdateExpression="REMOVE xc",
    )
    store._tips.clear()
    finish(store, steps=0, seq=25)


def a_child_in_an_earlier_chunk(store: DynamoDBStore) -> None:
    """The journal says a child started (its run not written yet: the index has none)."""
    at = store.clock.now()
    store.append("r1", 1, [Entry(2, Kind.CHILD_STARTED, "c", {"id": "r1-c", "workflow": "wf"}, at)])
    for i in range(12):
        step(store, 2 + 2 * i, i)
    assert len(chunks(store)) == 2
    finish(store, steps=0, seq=26)


def an_earlier_chunk_in_s3(store: DynamoDBStore) -> None:
    for i in range(12):
        step(store, 1 + 2 * i, i)
    store._db.update_item(
        TableName="t",
        Key={"pk": {"S": run_pk("r1")}, "sk": {"S": "J#0000000002"}},
        UpdateExpression="ADD batches_ref :k",
        ExpressionAttributeValues={":k": {"SS": ["runs/r1/elsewhere"]}},
    )
    store._tips.clear()
    finish(store, steps=0, seq=25)


def large_signal(store: DynamoDBStore) -> None:
    store.add_signal("r1", "go", "y" * 500, store.clock.now())
    finish(store)


def published_value(store: DynamoDBStore) -> None:
    store.append("r1", 1, [Entry(2, Kind.VALUE_SET, "stage", {"value": "paid"}, store.clock.now())])
    at = store.clock.now()
    store.append(
        "r1",
        2,
        [Entry(3, Kind.COMPLETED, None, {"result": 1}, at)],
        update=RunUpdate(Status.COMPLETED, None, result=1),
    )


def a_child(store: DynamoDBStore) -> None:
    at = store.clock.now()
    child = RunRecord("r1-c", "wf", Status.RUNNING, {}, parent_id="r1", created_at=at, updated_at=at)
    store.create_run(child, Entry(1, Kind.STARTED, "wf", {"format": 1, "input": {}}, at))
    finish(store)


def short_retention(store: DynamoDBStore) -> None:
    store.retention_s = 3_600.0
    finish(store)


@pytest.mark.parametrize(
    "case",
    [
        journal_past_the_ends_read,
        an_earlier_chunk_of_older_code,
        a_child_in_an_earlier_chunk,
        an_earlier_chunk_in_s3,
        large_signal,
        published_value,
        a_child,
        short_retention,
    ],
)
def test_a_run_with_more_than_its_run_item_and_one_chunk_is_swept(store: DynamoDBStore, case: Any) -> None:
    start(store)
    case(store)
    run_item = items(store)["K"]
    assert TTL_ATTRIBUTE not in run_item
    assert run_item["timer_pk"]["S"].startswith("#EXPIRE")
    assert not any(TTL_ATTRIBUTE in i for i in items(store).values())


def test_a_signal_numbered_but_not_yet_written_at_the_end_makes_the_run_swept(store: DynamoDBStore) -> None:
    """A sender between its two writes (the number on the run item, then its item): the run
    item says one more signal than the partition holds, so the item that will come would
    outlive a TTL'd run."""
    start(store)
    number_a_signal(store)
    finish(store)
    assert TTL_ATTRIBUTE not in items(store)["K"]


def test_a_signal_numbered_between_the_ends_read_and_its_summary_fails_the_summary(
    store: DynamoDBStore,
) -> None:
    """The end read the run with no signal; one is numbered before its summary: the summary
    loses (the engine then loads the run again and ends it with what it finds)."""
    start(store)
    store.append(
        "r1",
        1,
        [Entry(2, Kind.STEP_INTENT, "s", {"pass": 1, "attempt": 1}, store.clock.now())],
        update=RunUpdate(Status.RUNNING, "s"),
    )
    sent: list[int] = []

    def between(model: Any, params: dict[str, Any], **_: Any) -> None:
        # The end's first write (its chunk) comes after its read of the partition.
        if not sent:
            sent.append(1)
            number_a_signal(store)

    store._db.meta.events.register("before-call.dynamodb.UpdateItem", between)
    at = store.clock.now()
    with pytest.raises(JournalConflict):
        store.append(
            "r1",
            2,
            [Entry(3, Kind.COMPLETED, None, {"result": 1}, at)],
            update=RunUpdate(Status.COMPLETED, None, result=1),
        )
    assert sent and items(store)["K"]["status"]["S"] == Status.RUNNING
    assert TTL_ATTRIBUTE not in items(store)["K"]
    # Its replay writes the summary again: now swept, its chunk's TTL a week past the sweep.
    store.append("r1", 3, [], update=RunUpdate(Status.COMPLETED, None, result=1))
    swept_whole(store)


def test_a_signal_to_a_ttl_run_after_its_end_goes_with_it(store: DynamoDBStore) -> None:
    start(store)
    finish(store)
    store.add_signal("r1", "small", 1, store.clock.now())  # on the run item
    store.add_signal("r1", "large", "y" * 500, store.clock.now())  # an item, with the run's TTL
    run_item, signal = items(store)["K"], items(store)["S#0000000002"]
    assert int(signal[TTL_ATTRIBUTE]["N"]) == int(run_item[TTL_ATTRIBUTE]["N"]) + int(CHUNK_SLACK_S)
    assert signal[START_ATTR] == start_of(run_item["created_sk"]["S"])
    assert [(x.name, x.state) for x in store.signals("r1")] == [
        ("small", "set_aside"),
        ("large", "set_aside"),
    ]


def test_on_the_aws_path_ttl_deletes_the_run_whole_and_its_id_starts_anew(tmp_path: Any) -> None:
    """End to end (``AwsPlatform``, which plays TTL at each reconcile): the run expires, its
    items go in a random order, and the id starts a new run that reads nothing of the old."""
    from runtime.aws.harness import AwsPlatform

    with AwsPlatform(RETENTION_PROJECT, data_dir=tmp_path) as p:
        first = p.start("greet", {"name": "ada"}, id="g-1")
        assert first.result == {"hello": "ada", "run": 1}
        store = p.runtime.store
        table = items(store, "g-1")
        assert set(table) == {"K", "J#0000000002"} and all(TTL_ATTRIBUTE in i for i in table.values())
        p.advance("50h")  # past the 2 days; the reconcile that follows plays TTL
        left = items(store, "g-1")  # the chunk's TTL is a week later than the run item's
        assert set(left) == {"J#0000000002"} and left["J#0000000002"][START_ATTR] == start_of(
            table["K"]["created_sk"]["S"]
        )
        with pytest.raises(NoSuchRun):
            p.get("g-1")
        again = p.start("greet", {"name": "bob"}, id="g-1")
        assert again.result == {"hello": "bob", "run": 2}
        assert len(p.journal("g-1")) == 4
        assert items(store, "g-1")["J#0000000002"][START_ATTR] != start_of(table["K"]["created_sk"]["S"])
        p.advance("60d")  # the new run's retention and its chunk's week: all gone
        assert items(store, "g-1") == {}


def test_on_the_aws_path_a_journal_of_several_chunks_goes_by_ttl_alone(tmp_path: Any) -> None:
    """End to end: a run of 40 steps takes TTL on every item (nothing filed for the sweep),
    and after the run item's expiry and the chunks' week nothing of it is left."""
    from runtime.aws.harness import AwsPlatform

    with AwsPlatform(RETENTION_PROJECT, data_dir=tmp_path) as p:
        assert p.start("many", {"n": 40, "tag": "x"}, id="m-1").result == {"total": 820, "tag": "x"}
        store = p.runtime.store
        table = items(store, "m-1")
        assert len(chunks(store, "m-1")) >= 4 and all(TTL_ATTRIBUTE in i for i in table.values())
        assert "timer_pk" not in table["K"]
        p.advance("50h")
        assert set(items(store, "m-1")) == set(chunks(store, "m-1")) == set(table) - {"K"}
        p.advance("8d")
        assert items(store, "m-1") == {}


def lose_the_end_to_a_signal(store: DynamoDBStore) -> None:
    """A run at a step's result whose TTL'd end writes its chunk and then loses its summary
    to a signal numbered in between (its item not yet written)."""
    start(store)
    at = store.clock.now()
    store.append(
        "r1",
        1,
        [Entry(2, Kind.STEP_INTENT, "s", {"pass": 1, "attempt": 1}, at)],
        update=RunUpdate(Status.RUNNING, "s"),
    )
    store.append("r1", 2, [Entry(3, Kind.STEP_RESULT, "s", {"n": 1, "values": [1]}, at)])
    fired: list[int] = []

    def between(params: dict[str, Any], **_: Any) -> None:
        if not fired and params.get("Key", {}).get("sk", {}).get("S") == "J#0000000002":
            fired.append(1)
            number_a_signal(store)

    store._db.meta.events.register("before-parameter-build.dynamodb.UpdateItem", between, unique_id="between")
    with pytest.raises(JournalConflict):
        store.append(
            "r1",
            3,
            [Entry(4, Kind.COMPLETED, None, {"result": 1}, at)],
            update=RunUpdate(Status.COMPLETED, None, result=1),
        )
    store._db.meta.events.unregister("before-parameter-build.dynamodb.UpdateItem", unique_id="between")
    assert TTL_ATTRIBUTE in items(store)["J#0000000002"]


@pytest.mark.parametrize("how", ["an entry of its own (timed out)", "no entry (a failure)"])
def test_a_run_whose_ttl_end_lost_its_summary_and_then_fails_keeps_its_journal(
    store: DynamoDBStore, how: str
) -> None:
    """The run does not end as TTL's after all (here it fails, and a failed run is kept for
    its resume): the chunk's TTL is taken back, so its journal outlives the chunk's week."""
    lose_the_end_to_a_signal(store)
    at = store.clock.now()
    if how.startswith("an entry"):
        store.append(
            "r1",
            4,
            [Entry(5, Kind.TIMED_OUT, None, {"after": "1h"}, at)],
            update=RunUpdate(Status.FAILED, None, error="timed out"),
        )
    else:
        store.append("r1", 4, [], update=RunUpdate(Status.FAILED, None, error="not declared"))
    chunk = items(store)["J#0000000002"]
    assert TTL_ATTRIBUTE not in chunk and START_ATTR in chunk  # its start is never taken back
    later(store, 2 * DAY + CHUNK_SLACK_S + 10)
    ttl_deletes(store)
    run = store.get_run("r1")
    assert run is not None and run.status == Status.FAILED
    assert len(store.journal("r1")) == (5 if how.startswith("an entry") else 4)


def test_a_summary_alone_gives_no_ttl_when_the_ends_chunk_has_none(store: DynamoDBStore) -> None:
    """The end's chunk was written without a TTL (the run did not qualify then, or older
    code wrote it) and the summary was lost; the replay's summary, which would qualify now,
    leaves the run to the sweep: a TTL'd run item beside a chunk without one would leave the
    chunk for a later run of the id."""
    start(store)
    store.ttl_runs = False

    with dying_before_the_summary(store):
        finish(store, steps=0)
    store.ttl_runs = True
    store._tips.clear()  # a new process: the replay reads the run
    store.append("r1", 2, [], update=RunUpdate(Status.COMPLETED, None, result="done"))
    swept_whole(store)


def test_the_expiry_is_one_instant_for_reads_starts_and_signals(store: DynamoDBStore) -> None:
    """TTL's whole seconds round the expiry up; every rule reads it to the millisecond."""
    start(store)
    finish(store)
    run_item = items(store)["K"]
    at_ms = int(run_item["expires_ms"]["N"])
    assert int(run_item[TTL_ATTRIBUTE]["N"]) * 1000 > at_ms  # a window between the two
    later(store, at_ms / 1000 - store.clock.now() - 0.001)
    assert store.get_run("r1") is not None
    later(store, 0.2)  # past expires_ms, before expires_at
    assert store.get_run("r1") is None
    with pytest.raises(NoSuchRun):
        store.add_signal("r1", "ghost", 1, store.clock.now())
    start(store, value="new")
    assert store.get_run("r1").input == {"v": "new"}  # type: ignore[union-attr]


def test_a_late_signal_with_an_s3_payload_sends_the_run_back_to_the_sweep() -> None:
    """TTL would delete the signal's item and leave its S3 object: the run is filed for the
    sweep in the signal's own transaction, and the sweep deletes both."""
    import boto3

    from runtime.store.blobs import Blobs

    with store_table("t") as db:
        s3 = boto3.client("s3", region_name="eu-west-1")
        s3.create_bucket(Bucket="values", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        st = DynamoDBStore(db, "t", clock=FakeClock(1_000.5), blobs=Blobs(s3, "values"))
        st.retention_s = 2 * DAY
        start(st)
        finish(st)
        assert TTL_ATTRIBUTE in items(st)["K"]
        st.add_signal("r1", "big", "x" * (330 * 1024), st.clock.now())
        run_item = items(st)["K"]
        assert TTL_ATTRIBUTE not in run_item and run_item["timer_pk"]["S"].startswith("#EXPIRE")
        assert st.get_run("r1").expires_at == pytest.approx(1_000.5 + 2 * DAY)  # type: ignore[union-attr]
        later(st, 2 * DAY + 10)
        assert st.expire(st.clock.now()) == ["r1"] and items(st) == {}
        assert s3.list_objects_v2(Bucket="values").get("Contents", []) == []


def test_signal_items_older_code_left_without_a_start_are_no_signals_of_a_new_run(
    store: DynamoDBStore,
) -> None:
    """Older code (a rollback, a deploy switching over) writes a TTL'd run's late signal
    without its start: an item past the run's count of signals, or at the number of the
    signal on the run item, is no signal of the new run of the id."""
    start(store)
    for signal_id in (1, 5):
        store._db.put_item(
            TableName="t",
            Item={
                "pk": {"S": run_pk("r1")},
                "sk": {"S": f"S#{signal_id:010d}"},
                "signal_id": {"N": str(signal_id)},
                "run_id": {"S": "r1"},
                "at": {"N": "1"},
                "state": {"S": "set_aside"},
                "name": {"S": "old"},
                "payload": {"S": "1"},
            },
        )
    assert store.signals("r1") == [] and store.pending_signals("r1") == []
    store.add_signal("r1", "new", 2, store.clock.now())  # rides on the run item, number 1
    assert [(x.id, x.name) for x in store.signals("r1")] == [(1, "new")]
    assert [(x.id, x.name) for x in store.pending_signals("r1")] == [(1, "new")]


def a_new_run_goes_over_what_is_left(store: DynamoDBStore) -> None:
    """Past every TTL, with the old run's first chunk left without one: a new run of the id
    reads none of it and writes over it."""
    later(store, 2 * DAY + CHUNK_SLACK_S + 10)
    ttl_deletes(store)
    assert set(items(store)) == {"J#0000000002"}
    start(store, value="new")
    assert [e.kind for e in store.journal("r1")] == [Kind.STARTED]
    finish(store, result="new")
    assert store.get_run("r1").result == "new"  # type: ignore[union-attr]
    assert [e.kind for e in store.journal("r1")] == [
        Kind.STARTED,
        Kind.STEP_INTENT,
        Kind.STEP_RESULT,
        Kind.COMPLETED,
    ]


def test_a_chunk_a_racing_writer_left_without_its_ttl_is_still_no_part_of_a_new_run(
    store: DynamoDBStore,
) -> None:
    """A writer that appended between a TTL'd end's chunk and its summary (a cancel) takes
    the chunk's TTL back while the run item keeps its own: the chunk outlives the run (its
    storage), but it carries its start, so a new run of the id writes over it and never
    reads it."""
    start(store, value="old")
    finish(store, result="old")
    store._db.update_item(
        TableName="t",
        Key={"pk": {"S": run_pk("r1")}, "sk": {"S": "J#0000000002"}},
        UpdateExpression=f"REMOVE {TTL_ATTRIBUTE}",
    )
    a_new_run_goes_over_what_is_left(store)


def test_a_secret_pin_an_earlier_run_of_the_id_left_is_no_pin_of_the_new_run(store: DynamoDBStore) -> None:
    """A pin a late activation wrote after its run's TTL'd end outlives the run: it carries
    that run's start, so a new run of the id pins its own version over it."""

    class Kept:
        def keep(self, name: str, version: int) -> None:
            pass

    store._secrets = Kept()
    start(store, value="old")
    assert store.pin_secret("r1", "key", 3) == 3
    finish(store)
    assert TTL_ATTRIBUTE not in items(store)["K"]  # a pin: swept, not TTL's
    store.expire(store.clock.now())
    later(store, 2 * DAY + 1)
    pin = items(store)["P#key"]
    assert store.expire(store.clock.now()) == ["r1"] and items(store) == {}
    store._db.put_item(TableName="t", Item=pin)  # as a late activation of the old run leaves it
    start(store, value="new")
    assert store.pinned_secret("r1", "key") is None
    assert store.pin_secret("r1", "key", 5) == 5 and store.pinned_secret("r1", "key") == 5
    assert store.pin_secret("r1", "key", 6) == 5  # the run keeps its first version


def test_runs_ttl_has_yet_to_delete_do_not_shorten_a_list(
    store: DynamoDBStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A list took its first ``limit`` runs and then left out those past their expiry, so for
    up to about two days after runs expired together (TTL deletes late) it came back short,
    empty here. It now reads further runs in their place, at most LIST_SCAN deep."""
    for i in range(3):
        start(store, f"old{i}")  # in flight: no expiry
        later(store, 1)
    for i in range(5):
        start(store, f"new{i}")
        finish(store, f"new{i}")
        later(store, 1)
    assert [r.id for r in store.list_runs(limit=3)] == ["new4", "new3", "new2"]
    later(store, 3 * DAY)  # past their retention; TTL has deleted none of them yet
    assert all(TTL_ATTRIBUTE in items(store, f"new{i}")["K"] for i in range(5))
    assert [r.id for r in store.list_runs(limit=3)] == ["old2", "old1", "old0"]
    assert [r.id for r in store.list_runs(workflow="wf", limit=2)] == ["old2", "old1"]
    assert [r.id for r in store.list_runs(status=Status.RUNNING, limit=10)] == ["old2", "old1", "old0"]
    assert store.list_runs(status=Status.COMPLETED, limit=3) == []
    monkeypatch.setattr(dynamodb_index, "LIST_SCAN", 4)  # new4 ... new1: all left out
    assert store.list_runs(limit=3) == []
    monkeypatch.setattr(dynamodb_index, "LIST_SCAN", 8)  # the 8th newest is old0
    assert [r.id for r in store.list_runs(limit=3)] == ["old2", "old1", "old0"]


def test_a_list_filtered_by_status_and_workflow_reads_other_workflows_runs_by_what_decides(
    store: DynamoDBStore,
) -> None:
    """Past its first batch, a list reads each run's status, workflow and expiry first and
    whole only the runs it keeps: failed runs of other workflows (whose large inputs are
    their first chunks) are not read whole, page after page (found in review)."""

    def failed(run_id: str, workflow: str, size: int) -> None:
        at = store.clock.now()
        given = {"v": "x" * size}
        record = RunRecord(run_id, workflow, Status.RUNNING, given, created_at=at, updated_at=at)
        store.create_run(record, Entry(1, Kind.STARTED, workflow, {"format": 1, "input": given}, at))
        store.append(run_id, 1, [], update=RunUpdate(Status.FAILED, None, error="boom"))
        later(store, 1)

    failed("b0", "b", 1)
    for i in range(150):
        failed(f"a{i:03d}", "a", 40_000)
    whole: list[int] = []  # the keys of each BatchGetItem that reads items whole
    store._db.meta.events.register(
        "provide-client-params.dynamodb.BatchGetItem",
        lambda params, **_: whole.extend(
            len(t["Keys"]) for t in params["RequestItems"].values() if "ProjectionExpression" not in t
        ),
    )
    assert [r.id for r in store.list_runs(status=Status.FAILED, workflow="b", limit=5)] == ["b0"]
    # The first batch whole (5 run items and their first chunks), then b0 and its item alone.
    assert sum(whole) <= 2 * 5 + 2, whole


def test_a_list_shows_a_running_runs_step_and_one_unreadable_tail_hides_no_run(store: DynamoDBStore) -> None:
    """A list reads the step a woken run is in from its tip chunk's ``tail`` (the intent is a
    journal write alone); a tail it cannot read (a kind a newer lunaflow wrote) leaves that
    run's step unread rather than fail the list (found in review)."""
    for run_id in ("r1", "r2"):
        start(store, run_id)
        at = store.clock.now()
        intent = Entry(2, Kind.STEP_INTENT, "work", {"pass": 1, "attempt": 1}, at)
        store.append(run_id, 1, [intent], update=RunUpdate(Status.RUNNING, "work", progress_only=True))
        later(store, 1)
    assert [(r.id, r.current_step) for r in store.list_runs()] == [
        ("r2", "step 'work'"),
        ("r1", "step 'work'"),
    ]
    store._db.update_item(
        TableName=store.table,
        Key={"pk": {"S": run_pk("r2")}, "sk": {"S": "J#0000000002"}},
        UpdateExpression="SET tail = :t",
        ExpressionAttributeValues={":t": {"S": '["step.future", "work"]'}},
    )
    assert [(r.id, r.current_step) for r in store.list_runs()] == [("r2", None), ("r1", "step 'work'")]


def test_a_journal_of_several_chunks_expires_by_ttl_whole_the_earlier_chunks_after_the_end(
    store: DynamoDBStore,
) -> None:
    """A run of a few dozen steps (chunks hold about 700 bytes): its end gives the run item
    and its last chunk their TTL in its two writes, then every earlier chunk its own, one
    write each; the sweep never files it, and TTL leaves nothing of it."""
    start(store)
    for i in range(30):
        step(store, 1 + 2 * i, i)
    before = chunks(store)
    assert len(before) >= 4
    written: list[str] = []

    def note(params: dict[str, Any], **_: Any) -> None:
        written.append(params["Key"]["sk"]["S"])

    store._db.meta.events.register("before-parameter-build.dynamodb.UpdateItem", note, unique_id="note")
    requests = Requests(store._db)
    finish(store, steps=0, seq=61)
    ops = requests.take()
    store._db.meta.events.unregister("before-parameter-build.dynamodb.UpdateItem", unique_id="note")
    assert [op for op in ops if op != "Query"] == ["UpdateItem"] * (len(before) + 1)
    assert written[:2] == [before[-1], "K"] and sorted(written[2:]) == before[:-1]  # then the rest
    table = items(store)
    run_item, expiry = table["K"], 1_000.5 + 2 * DAY
    assert int(run_item[TTL_ATTRIBUTE]["N"]) == int(expiry) + 1 and "timer_pk" not in run_item
    for sk in chunks(store):
        assert int(table[sk][TTL_ATTRIBUTE]["N"]) == int(expiry) + 1 + int(CHUNK_SLACK_S), sk
        assert table[sk][START_ATTR] == start_of(run_item["created_sk"]["S"])
    assert [e.kind for e in store.journal("r1")][-1] == Kind.COMPLETED
    later(store, 2 * DAY + 1)
    assert store.get_run("r1") is None and store.expire(store.clock.now()) == []
    later(store, CHUNK_SLACK_S)
    ttl_deletes(store)
    assert items(store) == {}


def test_an_end_that_loses_its_summary_gives_the_earlier_chunks_no_ttl(store: DynamoDBStore) -> None:
    """Before the summary commits, the run may yet go on (here it then fails, and a failed
    run is kept for its resume): its earlier chunks must not expire, so they are given
    nothing until the summary has committed."""
    start(store)
    for i in range(12):
        step(store, 1 + 2 * i, i)
    assert len(chunks(store)) == 2
    tip = chunks(store)[-1]
    fired: list[int] = []

    def between(params: dict[str, Any], **_: Any) -> None:
        if not fired and params.get("Key", {}).get("sk", {}).get("S") == tip:
            fired.append(1)
            number_a_signal(store)

    store._db.meta.events.register("before-parameter-build.dynamodb.UpdateItem", between, unique_id="between")
    at = store.clock.now()
    with pytest.raises(JournalConflict):
        store.append(
            "r1",
            25,
            [Entry(26, Kind.COMPLETED, None, {"result": 1}, at)],
            update=RunUpdate(Status.COMPLETED, None, result=1),
        )
    store._db.meta.events.unregister("before-parameter-build.dynamodb.UpdateItem", unique_id="between")
    assert TTL_ATTRIBUTE in items(store)[tip] and TTL_ATTRIBUTE not in items(store)["J#0000000002"]
    store.append("r1", 26, [], update=RunUpdate(Status.FAILED, None, error="not declared"))
    assert not any(TTL_ATTRIBUTE in i for i in items(store).values())
    later(store, 2 * DAY + CHUNK_SLACK_S + 10)
    ttl_deletes(store)
    assert store.get_run("r1").status == Status.FAILED  # type: ignore[union-attr]
    assert len(store.journal("r1")) == 26


def test_a_summary_alone_after_a_lost_answer_gives_the_earlier_chunks_their_ttl(store: DynamoDBStore) -> None:
    """The end's chunk committed with its TTL and the process died before the summary: the
    replay's summary alone gives the run item its TTL, and the earlier chunks theirs."""
    start(store)
    for i in range(12):
        step(store, 1 + 2 * i, i)

    with dying_before_the_summary(store):
        finish(store, steps=0, seq=25)
    assert TTL_ATTRIBUTE not in items(store)["J#0000000002"]
    store._tips.clear()  # a new process: the replay reads the run
    store.append("r1", 26, [], update=RunUpdate(Status.COMPLETED, None, result="done"))
    assert all(TTL_ATTRIBUTE in i for i in items(store).values())
    assert "timer_pk" not in items(store)["K"]


def test_earlier_chunks_left_without_their_ttl_are_no_part_of_a_new_run(
    store: DynamoDBStore, caplog: pytest.LogCaptureFixture
) -> None:
    """The end committed and its earlier chunks' writes failed (logged) or never came (the
    process died): they outlive the run, and a new run of the id neither reads them nor is
    refused its own writes over them."""
    start(store, value="old")
    for i in range(12):
        step(store, 1 + 2 * i, i)

    def refuse(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key", {}).get("sk", {}).get("S") == "J#0000000002":
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "no"}}, "UpdateItem")

    store._db.meta.events.register("before-parameter-build.dynamodb.UpdateItem", refuse, unique_id="refuse")
    with caplog.at_level("WARNING", logger="lunaflow.store"):
        finish(store, steps=0, seq=25, result="old")
    store._db.meta.events.unregister("before-parameter-build.dynamodb.UpdateItem", unique_id="refuse")
    assert "run 'r1' ended, and its journal chunk 'J#0000000002' could not be given its expiry" in caplog.text
    assert store.get_run("r1").result == "old"  # type: ignore[union-attr]
    a_new_run_goes_over_what_is_left(store)


def old_long_run_expired(store: DynamoDBStore) -> list[str]:
    """A run of 30 steps ended by TTL and its run item past its expiry (TTL has deleted
    nothing yet): its chunks, of the old start, stay for a week more. Their keys."""
    start(store, value="old")
    for i in range(30):
        step(store, 1 + 2 * i, i)
    finish(store, steps=0, seq=61, result="OLD")
    old = chunks(store)
    assert len(old) >= 4 and all(TTL_ATTRIBUTE in items(store)[k] for k in old)
    later(store, 2 * DAY + 10)
    start(store, value="new")
    return old


@pytest.mark.parametrize("deleted", ["nothing", "the run item"])
def test_a_new_run_of_the_id_ends_with_its_own_result_beside_an_old_runs_chunks(
    store: DynamoDBStore, deleted: str
) -> None:
    """Its end's summary lost and written again alone: it points at the new run's chunk,
    not at the highest chunk of the partition (an old one), and every read of the result
    says the new run's."""
    old_long_run_expired(store)
    if deleted == "the run item":
        ttl_deletes(store, keep={k for k in items(store) if k != "K"})  # TTL took the old run item only
    step(store, 1, 0)

    at = store.clock.now()
    with dying_before_the_summary(store):
        store.append(
            "r1",
            3,
            [Entry(4, Kind.COMPLETED, None, {"result": "NEW"}, at)],
            update=RunUpdate(Status.COMPLETED, None, result="NEW"),
        )
    store._tips.clear()  # a new process
    store.append("r1", 4, [], update=RunUpdate(Status.COMPLETED, None, result="NEW"))
    assert items(store)["K"]["result_sk"]["S"] == "J#0000000002"
    assert store.get_run("r1").result == "NEW"  # type: ignore[union-attr]
    assert [(r.id, r.result) for r in store.list_runs()] == [("r1", "NEW")]
    assert [(r.id, r.result) for r in store.list_runs(status=Status.COMPLETED)] == [("r1", "NEW")]
    assert len(store.journal("r1")) == 4


def test_a_new_runs_load_from_an_entry_finds_its_own_chunk_under_an_old_runs(store: DynamoDBStore) -> None:
    """A warm load from entry n reads the chunk holding n: the newest chunk up to it may be
    an old run's, which the read steps over to the new run's own."""
    old = old_long_run_expired(store)
    at = store.clock.now()
    for seq in range(1, 41):
        store.append("r1", seq, [Entry(seq + 1, Kind.STEP_INTENT, "a", {"pass": 1, "attempt": seq}, at)])
    old_start = items(store)[old[-1]][START_ATTR]
    mine = [k for k, i in items(store).items() if k.startswith("J#") and i[START_ATTR] != old_start]
    assert len(mine) >= 3 and any(mine[0] < o < mine[-1] for o in old)  # old chunks between the new's
    for after in range(1, 41):
        store._tips.clear()  # a new process, which knows no tip
        snap = store.load("r1", after=after)
        assert snap is not None and snap.run.journal_len == 41, after
        assert [e.seq for e in snap.journal] == list(range(after + 1, 42)), after
    assert store.get_run("r1").current_step == "step 'a'"  # type: ignore[union-attr]
    assert [r.current_step for r in store.list_runs()] == ["step 'a'"]


def test_a_journal_of_max_chunks_goes_by_ttl_and_one_with_a_signal_item_besides_is_swept(
    store: DynamoDBStore,
) -> None:
    def grow_to(run_id: str, count: int) -> int:
        seq, i = 1, 0
        while True:
            at = store.clock.now()
            entry = [Entry(seq + 1, Kind.STEP_INTENT, f"s{i}", {"pass": 1, "attempt": 1}, at)]
            probe = chunks(store, run_id)
            if len(probe) == count and store._tips[run_id].last == seq:
                # one more entry must still go into the last chunk: stop while it would
                from runtime.store.dynamodb_chunks import extends

                if not extends(store._tips[run_id], entry):
                    raise AssertionError("the tip is full")
                return seq
            store.append(run_id, seq, entry)
            seq, i = seq + 1, i + 1

    start(store, "r1")
    seq = grow_to("r1", MAX_CHUNKS)
    finish(store, "r1", steps=0, seq=seq)
    assert len(chunks(store)) == MAX_CHUNKS
    assert all(TTL_ATTRIBUTE in i for i in items(store).values())
    start(store, "r2")
    seq = grow_to("r2", MAX_CHUNKS)
    store.add_signal("r2", "big", "y" * 500, store.clock.now())  # an item of its own
    finish(store, "r2", steps=0, seq=seq)
    assert not any(TTL_ATTRIBUTE in i for i in items(store, "r2").values())
    assert items(store, "r2")["K"]["timer_pk"]["S"].startswith("#EXPIRE")

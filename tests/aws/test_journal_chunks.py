"""Issue 31 (retention's deletes, a write per journal item): a run's journal chunks grow in
place (``runtime.store.dynamodb_chunks``), so a run has a chunk per ~KB of journal instead
of one per append, and two writers with the same view still meet on one condition.

These tests drive the store as writers do (two stores are two containers) and read the
table's items as they are.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.dynamodb.models import table as moto_table

from runtime.core.journal import Entry, Kind, Status
from runtime.errors import JournalConflict, LunaflowError
from runtime.store import dynamodb_append, dynamodb_chunks
from runtime.store.base import RunRecord, RunUpdate
from runtime.store.blobs import Blobs
from runtime.store.dynamodb import DynamoDBStore, run_pk
from runtime.store.dynamodb_chunks import SEAL_BYTES
from runtime.store.dynamodb_reads import CREATED_KEPT
from runtime.testing import AwsPlatform, LocalPlatform
from tests.support.moto_table import partition_items, store_table

# The chunks' own rules (a run with a head meets them past it: tests/aws/test_journal_head.py).
pytestmark = pytest.mark.usefixtures("no_head")

TABLE = "lunaflow"


BUCKET = "values"
CONTINUE = Path(__file__).resolve().parents[1] / "projects" / "continue"


@pytest.fixture
def db() -> Iterator[Any]:
    with store_table(TABLE) as client:
        yield client


@pytest.fixture
def s3(db: Any) -> Any:
    client = boto3.client("s3", region_name="eu-west-1")
    client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    return client


@pytest.fixture
def blobs(s3: Any) -> Blobs:
    return Blobs(s3, BUCKET)


@contextlib.contextmanager
def monkeypatch_v2(on: bool) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(dynamodb_append.Appends, "journal_v2", on)
        yield


def start(store: DynamoDBStore, run_id: str = "r1") -> None:
    run = RunRecord(id=run_id, workflow="wf", status=Status.RUNNING, input={}, created_at=1.0, updated_at=1.0)
    store.create_run(run, Entry(1, Kind.STARTED, "wf", {"input": {}}, 1.0))


def step(seq: int, name: str = "s", result: Any = "ok") -> list[Entry]:
    return [
        Entry(seq, Kind.STEP_INTENT, name, {"attempt": 1}, 2.0),
        Entry(seq + 1, Kind.STEP_RESULT, name, {"n": 1, "values": [result]}, 2.0),
    ]


def chunks(db: Any, run_id: str = "r1") -> list[dict[str, Any]]:
    return partition_items(db, TABLE, run_id, "J#")


def seqs(store: DynamoDBStore, run_id: str = "r1") -> list[int]:
    return [e.seq for e in store.journal(run_id)]


def test_a_20_step_run_keeps_a_chunk_per_kb_of_journal_not_one_per_append(db: Any) -> None:
    store = DynamoDBStore(db, TABLE)
    start(store)
    length = 1
    for i in range(20):
        store.append("r1", length, step(length + 1, f"step-{i}"))
        length += 2
    items = chunks(db)
    assert 2 <= len(items) <= 6, len(items)  # was 20: one per append
    # Every chunk but the last was filled to the size before the next began.
    assert all(int(c["bytes"]["N"]) >= SEAL_BYTES for c in items[:-1])
    assert seqs(store) == list(range(1, 42))
    assert seqs(DynamoDBStore(db, TABLE)) == list(range(1, 42))  # a container that wrote none


def test_two_writers_at_one_view_of_an_open_chunk_meet_on_its_last_entry(db: Any) -> None:
    a, b = DynamoDBStore(db, TABLE), DynamoDBStore(db, TABLE)
    start(a)
    a.append("r1", 1, step(2))
    assert b.load("r1") is not None and a.load("r1") is not None  # both read the journal at 3
    a.append("r1", 3, step(4, "a"))
    with pytest.raises(JournalConflict):
        b.append("r1", 3, step(4, "b"))
    assert [e.name for e in a.journal("r1")][-2:] == ["a", "a"]
    assert len(chunks(db)) == 1


def test_two_writers_at_one_view_of_a_full_chunk_meet_on_the_next_key(db: Any) -> None:
    a, b = DynamoDBStore(db, TABLE), DynamoDBStore(db, TABLE)
    start(a)
    a.append("r1", 1, step(2, result="x" * SEAL_BYTES))  # fills the first chunk at once
    assert b.load("r1") is not None and a.load("r1") is not None
    a.append("r1", 3, step(4, "a"))
    with pytest.raises(JournalConflict):
        b.append("r1", 3, step(4, "b"))
    assert [e.name for e in b.journal("r1")][-2:] == ["a", "a"]
    assert [c["sk"]["S"] for c in chunks(db)] == ["J#0000000002", "J#0000000004"]


def continued(seq: int) -> list[Entry]:
    return [Entry(seq, Kind.CONTINUED, None, {"generation": 2, "input": {}}, 3.0)]


@pytest.mark.parametrize("first", ["generation", "extension"])
def test_a_generation_that_starts_a_chunk_and_an_extension_from_one_view_meet(db: Any, first: str) -> None:
    """The generation's writer seals the open chunk before it puts the next one: whichever
    of the two writes its condition first, the other one loses."""
    a, b = DynamoDBStore(db, TABLE), DynamoDBStore(db, TABLE)
    start(a)
    a.append("r1", 1, step(2))
    assert a.load("r1") is not None and b.load("r1") is not None
    winner, loser = (a, b) if first == "generation" else (b, a)
    if first == "generation":
        a.append("r1", 3, continued(4), update=RunUpdate(Status.RUNNING, None))
        with pytest.raises(JournalConflict):
            b.append("r1", 3, step(4, "b"))
        assert [c["sk"]["S"] for c in chunks(db)] == ["J#0000000002", "J#0000000004"]
    else:
        b.append("r1", 3, step(4, "b"))
        with pytest.raises(JournalConflict):
            a.append("r1", 3, continued(4), update=RunUpdate(Status.RUNNING, None))
        assert [c["sk"]["S"] for c in chunks(db)] == ["J#0000000002"]
    assert seqs(winner) == seqs(loser) == [1, 2, 3, 4] + ([5] if first == "extension" else [])


def test_a_writer_behind_an_extension_cannot_write_beside_it(db: Any) -> None:
    """A writer that read the journal before an extension (its view: entry 3, chunk open)
    loses whether it extends or starts a generation."""
    a, b = DynamoDBStore(db, TABLE), DynamoDBStore(db, TABLE)
    start(a)
    a.append("r1", 1, step(2))
    assert b.load("r1") is not None and a.load("r1") is not None
    a.append("r1", 3, step(4, "a"))
    for entries in (step(4, "b"), continued(4)):
        with pytest.raises(JournalConflict):
            b.append("r1", 3, entries, update=RunUpdate(Status.RUNNING, None))
    assert seqs(DynamoDBStore(db, TABLE)) == [1, 2, 3, 4, 5]


def test_a_park_with_no_new_entries_holds_only_while_the_chunk_has_not_moved(db: Any) -> None:
    a, b = DynamoDBStore(db, TABLE), DynamoDBStore(db, TABLE)
    start(a)
    a.append("r1", 1, step(2))
    assert a.load("r1") is not None and b.load("r1") is not None
    a.append("r1", 3, step(4, "a"))
    with pytest.raises(JournalConflict):
        b.append("r1", 3, [], update=RunUpdate(Status.AWAITING, "wait"))
    a.append("r1", 5, [], update=RunUpdate(Status.AWAITING, "wait"))
    assert DynamoDBStore(db, TABLE).get_run("r1").status == "awaiting"  # type: ignore[union-attr]


def test_a_container_that_read_only_the_end_reads_what_grew_in_place(db: Any) -> None:
    """``load(after=n)`` in a container that does not know which chunk holds entry n reads
    that chunk as well: entries appended into it since are not lost."""
    writer = DynamoDBStore(db, TABLE)
    start(writer)
    writer.append("r1", 1, step(2))
    reader = DynamoDBStore(db, TABLE)
    first = reader.load("r1")
    assert first is not None and first.run.journal_len == 3
    writer.append("r1", 3, step(4, "later"))
    cold = DynamoDBStore(db, TABLE).load("r1", after=3)
    warm = reader.load("r1", after=3)
    for snap in (cold, warm):
        assert snap is not None and [(e.seq, e.name) for e in snap.journal] == [(4, "later"), (5, "later")]


def older_entry_1(db: Any, blobs: Blobs, run_id: str) -> Any:
    """Where code from before this layout (3eab5f8, ``Reads._started``) finds a run's entry
    1: ``started`` on the run item, else chunk J#1's ``entries``, else the S3 object its
    ``entries_ref`` names; it raises ``LunaflowError`` when the chunk is missing."""
    item = db.get_item(TableName=TABLE, Key={"pk": {"S": run_pk(run_id)}, "sk": {"S": "K"}})["Item"]
    if "started" in item:
        return json.loads(item["started"]["S"])
    first = db.get_item(TableName=TABLE, Key={"pk": {"S": run_pk(run_id)}, "sk": {"S": "J#0000000001"}})
    if "Item" not in first:
        raise LunaflowError(f"run '{run_id}' has lost its first journal entry (its input)")
    chunk = first["Item"]
    text = chunk["entries"]["S"] if "entries" in chunk else blobs.get(chunk["entries_ref"]["S"])
    return json.loads(text)[0]


def test_a_v2_run_is_refused_by_code_from_before_it_with_an_error_it_reports(db: Any, blobs: Blobs) -> None:
    """Older code reading a v2 run would miss every entry after the first and append by its
    own rule: it must refuse the run instead, with a ``LunaflowError`` (which its lists
    report beside the run) rather than an ``IndexError`` that breaks them."""
    store = DynamoDBStore(db, TABLE, blobs=blobs)
    start(store, "small")
    big = RunRecord(
        id="big", workflow="wf", status=Status.RUNNING, input="b" * 2000, created_at=1.0, updated_at=1.0
    )
    store.create_run(big, Entry(1, Kind.STARTED, "wf", {"input": "b" * 2000}, 1.0))
    for run_id in ("small", "big"):
        item = db.get_item(TableName=TABLE, Key={"pk": {"S": run_pk(run_id)}, "sk": {"S": "K"}})["Item"]
        assert item["jv"] == {"N": "2"}
        with pytest.raises(LunaflowError, match="lost its first journal entry|is missing from bucket"):
            older_entry_1(db, blobs, run_id)
    with monkeypatch_v2(False):
        start(DynamoDBStore(db, TABLE, blobs=blobs), "older")
    assert older_entry_1(db, blobs, "older")["data"] == {"input": {}}  # the check reads what it should
    assert store.get_run("big").input == "b" * 2000  # type: ignore[union-attr]
    assert store.expire(1e12) is not None  # nothing points at the refusal's key: no error


def test_the_first_chunk_holds_entry_1_alone_so_dropped_generations_stay_dropped(tmp_path: Path) -> None:
    """A review found a large input's chunk (J#1) growing with generation 1's entries, which
    ``drop_entries`` never deletes: a cold load returned them after continue_as_new dropped
    that generation, and ``run:generations()`` listed it (local: dropped)."""
    journals = {}
    for harness in (LocalPlatform, AwsPlatform):
        with harness(CONTINUE, data_dir=tmp_path / harness.__name__) as p:
            p.start("subscription", {"customer": "c" * 450, "months": 20}, id="sub-big")
            for _ in range(14):
                p.signal("sub-big", "renew", None)
            p.restart()  # a cold container reads the table
            journal = p.journal("sub-big")
            journals[harness.__name__] = (
                [e.seq for e in journal],
                p.platform.generations("sub-big")["dropped"],
            )
    assert journals["AwsPlatform"] == journals["LocalPlatform"]
    seqs, dropped = journals["AwsPlatform"]
    assert seqs[0] == 1 and seqs[1] > 2 and dropped > 0


def two_full_chunks_and_an_open_tip(db: Any) -> tuple[DynamoDBStore, int]:
    """A run of 9 entries: two sealed chunks and an open one; its writer and the length."""
    writer = DynamoDBStore(db, TABLE)
    start(writer)
    length = 1
    for i in range(4):
        writer.append("r1", length, step(length + 1, f"s{i}", "x" * (400 if i < 2 else 10)))
        length += 2
    return writer, length


def page_size_ending_after_the_chunks(db: Any) -> int:
    """A page size (moto's, lowered) at which a load's Query returns the run's chunks on its
    first page and the run item on the next: the boundary DynamoDB puts at 1 MB."""
    count = len(chunks(db))

    def ends_there(limit: int) -> bool:
        moto_table.RESULT_SIZE_LIMIT = limit
        try:  # moto fails a page too small for one item
            page = db.query(
                TableName=TABLE,
                KeyConditionExpression="pk = :pk AND sk BETWEEN :a AND :k",
                ExpressionAttributeValues={":pk": {"S": run_pk("r1")}, ":a": {"S": "J#"}, ":k": {"S": "K"}},
                ConsistentRead=True,
            )
        except IndexError:
            return False
        items = page["Items"]
        return "LastEvaluatedKey" in page and len(items) == count and items[-1]["sk"]["S"] != "K"

    return next(x for x in range(100, 20_000, 10) if ends_there(x))


def test_a_read_across_pages_that_the_journal_outgrew_is_read_again(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Query past 1 MB is paged, and pages are no snapshot: the tip read on the first page
    before it grew, the chunk after it on the next, made a journal with a hole, and an
    append decided on it committed (found by a review). The load reads again instead."""
    one_mb = moto_table.RESULT_SIZE_LIMIT
    monkeypatch.setattr(moto_table, "RESULT_SIZE_LIMIT", one_mb)
    writer, length = two_full_chunks_and_an_open_tip(db)
    moto_table.RESULT_SIZE_LIMIT = page_size_ending_after_the_chunks(db)
    armed = [True]

    def between_pages(parsed: Any, **_: Any) -> None:
        nonlocal length
        if armed[0] and "LastEvaluatedKey" in parsed:
            moto_table.RESULT_SIZE_LIMIT = one_mb
            armed[0] = False
            writer.append("r1", length, step(length + 1, "late-1", "y" * 800))  # fills the tip
            writer.append("r1", length + 2, step(length + 3, "late-2"))  # a new chunk after it
            length += 4

    db.meta.events.register("after-call.dynamodb.Query", between_pages)
    snap = DynamoDBStore(db, TABLE).load("r1")
    assert snap is not None and not armed[0]
    assert [e.seq for e in snap.journal] == list(range(1, length + 1))


def test_writers_of_two_releases_with_different_sizes_still_meet(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether a tip is closed is in the data (``sealed``), not in a release's SEAL_BYTES:
    a later release that tunes it and this one, at one view during a deploy, contend on one
    condition (found by a review: both committed entries 4 and 5)."""
    old, new = DynamoDBStore(db, TABLE), DynamoDBStore(db, TABLE)
    start(old)
    old.append("r1", 1, step(2, "a", "x" * 600))  # J#2: ~670 bytes, open at 700
    assert old.load("r1") is not None and new.load("r1") is not None
    monkeypatch.setattr(dynamodb_chunks, "SEAL_BYTES", 600)  # the later release: it is full there
    new.append("r1", 3, step(4, "new"))
    monkeypatch.setattr(dynamodb_chunks, "SEAL_BYTES", 700)
    with pytest.raises(JournalConflict):
        old.append("r1", 3, step(4, "old"))
    assert [e.name for e in DynamoDBStore(db, TABLE).journal("r1")][-2:] == ["new", "new"]


def test_a_completed_runs_result_is_read_from_its_last_batch_alone(db: Any, blobs: Blobs, s3: Any) -> None:
    """A tip may hold several batches whose rows went to S3 (each a short key): the result,
    the run's last entry, is read from the last batch, not from every object (a review
    counted 6 GetObject for one get_run)."""
    writer = DynamoDBStore(db, TABLE, blobs=blobs)
    start(writer)
    length = 1
    for i in range(6):
        writer.append("r1", length, step(length + 1, f"s{i}", "v" * (70 * 1024)))
        length += 2
    writer.append(
        "r1",
        length,
        [Entry(length + 1, Kind.COMPLETED, None, {"result": "done"}, 3.0)],
        update=RunUpdate(Status.COMPLETED, None),
    )
    gets: list[str] = []
    s3.meta.events.register("before-call.s3.GetObject", lambda **_: gets.append("get"))
    reader = DynamoDBStore(db, TABLE, blobs=Blobs(s3, BUCKET))  # another container: nothing cached
    got = reader.get_run("r1")
    assert got is not None and got.result == "done" and len(gets) <= 1
    assert [r.result for r in reader.list_runs()] == ["done"]


def test_a_run_of_the_older_layout_keeps_a_chunk_per_append(db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The upgrade: a run started by older code is appended to by its rule (a new chunk per
    append, each on a free slot), and read whole."""
    with monkeypatch.context() as old_code:
        old_code.setattr(dynamodb_append.Appends, "journal_v2", False)
        old = DynamoDBStore(db, TABLE)
        start(old)
        old.append("r1", 1, step(2))
    new = DynamoDBStore(db, TABLE)
    snap = new.load("r1")
    assert snap is not None and snap.run.journal_len == 3
    new.append("r1", 3, step(4))
    new.append("r1", 5, step(6), update=RunUpdate(Status.COMPLETED, None))
    assert [c["sk"]["S"] for c in chunks(db)] == ["J#0000000002", "J#0000000004", "J#0000000006"]
    assert all("entries" in c for c in chunks(db))
    assert seqs(DynamoDBStore(db, TABLE)) == [1, 2, 3, 4, 5, 6, 7]


def test_a_growing_chunk_is_sealed_by_the_write_that_fills_it(db: Any) -> None:
    """An extension costs the whole item, so a chunk stops growing at the size: the write
    that takes it there seals it, and only that write may pass 1 KB (by its own rows)."""
    keys: list[dict[str, Any]] = []

    def after(params: dict[str, Any], model: Any, **_: Any) -> None:
        keys.append(params["Key"])

    store = DynamoDBStore(db, TABLE)
    start(store)
    db.meta.events.register("provide-client-params.dynamodb.UpdateItem", after)
    length, over = 1, 0
    for i in range(30):
        keys.clear()
        store.append("r1", length, step(length + 1, f"step-{i}", {"n": i, "text": "t" * 100}))
        length += 2
        for key in keys:
            item = db.get_item(TableName=TABLE, Key=key)["Item"]
            if len(json.dumps(item)) > 1024:
                over += 1
                assert "sealed" in item, item["sk"]
    items = chunks(db)
    assert all("sealed" in c for c in items[:-1]) and over <= len(items)


def test_a_drop_interrupted_part_way_leaves_the_run_loadable(db: Any) -> None:
    """Found by a review: ``Executor._continue`` lets a failed ``drop_entries`` be (the next
    generation's start tries again), and a Lambda may time out mid-drop; what is left is a
    suffix of the journal starting mid-generation, which every load took for a torn read and
    refused, three times, for ever."""
    store = DynamoDBStore(db, TABLE)
    start(store)
    length = 1
    for i in range(3):  # each append fills its chunk: J#2, J#4, J#6, all sealed
        store.append("r1", length, step(length + 1, f"g1-{i}", "x" * 800))
        length += 2
    store.append("r1", length, continued(length + 1), update=RunUpdate(Status.RUNNING, None))
    cut = length + 1
    length += 1
    store.append("r1", length, step(length + 1, "g2"))
    length += 2
    assert [c["sk"]["S"] for c in chunks(db)] == [
        "J#0000000002",
        "J#0000000004",
        "J#0000000006",
        "J#0000000008",
    ]

    real_delete, calls = store._db.delete_item, [0]

    def delete_then_die(**kw: Any) -> Any:
        calls[0] += 1
        if calls[0] == 2:
            raise RuntimeError("Lambda timed out / throttled mid-drop")
        return real_delete(**kw)

    store._db.delete_item = delete_then_die  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        store.drop_entries("r1", cut)
    store._db.delete_item = real_delete  # type: ignore[method-assign]
    assert [c["sk"]["S"] for c in chunks(db)] == ["J#0000000004", "J#0000000006", "J#0000000008"]

    snap = DynamoDBStore(db, TABLE).load("r1")  # any cold container
    assert snap is not None and snap.run.journal_len == length


# --- 2. a torn paged read whose next chunk is a run.continued passes _whole -------------


def test_a_torn_read_before_a_generation_start_is_read_again(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a review: between the pages the writer extends the tip (a wait.done that
    consumes signal 1) and continues as new (the tip sealed, a chunk starting with
    run.continued). A hole before a run.continued was taken for dropped generations, so the
    load lost the wait.done and offered the consumed signal again."""
    one_mb = moto_table.RESULT_SIZE_LIMIT
    monkeypatch.setattr(moto_table, "RESULT_SIZE_LIMIT", one_mb)
    writer, length = two_full_chunks_and_an_open_tip(db)
    writer.add_signal("r1", "go", {"i": 1}, 2.0)
    assert writer.load("r1") is not None
    moto_table.RESULT_SIZE_LIMIT = page_size_ending_after_the_chunks(db)
    armed = [True]
    final = [0]

    def between_pages(parsed: Any, **_: Any) -> None:
        if armed[0] and "LastEvaluatedKey" in parsed:
            moto_table.RESULT_SIZE_LIMIT = one_mb
            armed[0] = False
            n = length
            done = {"by": "signal", "signal": "go", "payload": {"i": 1}, "signal_id": 1}
            writer.append(
                "r1", n, [Entry(n + 1, Kind.WAIT_DONE, "await", done, 2.0)]
            )  # small: tip stays open
            # the continue's chunk; its summary (sig_done) is the next write, not yet made
            writer.append("r1", n + 1, continued(n + 2))
            final[0] = n + 2

    db.meta.events.register("after-call.dynamodb.Query", between_pages)
    snap = DynamoDBStore(db, TABLE).load("r1")
    assert snap is not None and not armed[0]
    seqs = [e.seq for e in snap.journal]
    assert seqs == list(range(1, final[0] + 1)), f"hole accepted: {seqs}"
    assert [x.id for x in snap.signals] == [], "a consumed signal is offered again"


def test_a_load_during_a_drop_that_succeeds_is_not_an_error(db: Any) -> None:
    """Found by a review: a load (another container, the console) made while
    ``drop_entries`` deletes oldest first reads a suffix of the journal, not a torn one."""
    writer = DynamoDBStore(db, TABLE)
    start(writer)
    length = 1
    for i in range(4):
        writer.append("r1", length, step(length + 1, f"g1-{i}", "x" * 800))
        length += 2
    writer.append("r1", length, continued(length + 1), update=RunUpdate(Status.RUNNING, None))
    cut = length + 1
    length += 1
    real_delete = writer._db.delete_item
    seen: list[Any] = []

    def delete_and_look(**kw: Any) -> Any:
        out = real_delete(**kw)
        if len(seen) == 0:
            try:
                snap = DynamoDBStore(db, TABLE).load("r1")
                seen.append([e.seq for e in snap.journal] if snap else None)
            except LunaflowError as e:
                seen.append(e)
        return out

    writer._db.delete_item = delete_and_look  # type: ignore[method-assign]
    writer.drop_entries("r1", cut)
    assert not isinstance(seen[0], LunaflowError), seen[0]


def test_create_run_keeps_created_bounded(db: Any) -> None:
    """A container that starts runs and never loads one (the API function) keeps a bounded
    number of their starts (found by a review: one per run it ever started)."""
    store = DynamoDBStore(db, TABLE)
    for i in range(CREATED_KEPT + 200):
        start(store, f"r{i}")
    assert len(store._created) <= CREATED_KEPT + 1, len(store._created)


@pytest.mark.parametrize("v2", [False, True])
def test_a_completed_runs_listed_result_survives_an_entry_after_its_end(db: Any, v2: bool) -> None:
    """A cancel that read the journal after run.completed's chunk but before its summary
    appends after it (its summary then loses: the run ended). The result is in the tip's
    batch before the last one: lists and get_run still find it (found by a review: None)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(dynamodb_append.Appends, "journal_v2", v2)
        store = DynamoDBStore(db, TABLE)
        start(store)
        store.append("r1", 1, step(2))
        done = [Entry(4, Kind.COMPLETED, None, {"result": "done"}, 3.0)]
        late = [Entry(5, Kind.CANCEL_REQUESTED, None, {}, 3.0)]
        store.append("r1", 3, done)  # the completion's chunk
        store.append("r1", 4, late)  # the cancel's chunk, between the completion's two writes
        # the completion's summary (position 4) as _summary writes it after its chunk
        sk = "J#0000000004" if not v2 else store._tips["r1"].sk
        assert sk is not None
        summary = store._summary("r1", 4, done, sk, RunUpdate(Status.COMPLETED, None), None, [], "tok")
        db.update_item(**summary)
    listed = DynamoDBStore(db, TABLE).list_runs()
    assert [r.result for r in listed] == ["done"]
    assert DynamoDBStore(db, TABLE).get_run("r1").result == "done"  # type: ignore[union-attr]

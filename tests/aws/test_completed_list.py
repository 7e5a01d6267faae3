"""Issue 31.2 ("Indexes"), stop 51: a completed run leaves the status index.

Before, a run's end moved its status index entry from ``STATUS#live`` to
``STATUS#completed`` (a delete and a put: 2 index WRU) and its expiry deleted it again (1
more). Now the end removes it (1) and the run is listed from ``by_workflow``, the entry
every run has from its start to its expiry: the runs there that are in no status partition
are the completed ones. The end records its workflow's name first (once per store), so a
list of every run, or of the completed ones, knows which ``by_workflow`` partitions to read.
Runs older code completed stay under ``STATUS#completed`` and are listed with them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from runtime.core.clock import FakeClock
from runtime.core.journal import Entry, Kind, Status
from runtime.store import dynamodb_index
from runtime.store.base import RunRecord, RunUpdate
from runtime.store.dynamodb import RUN_SK, DynamoDBStore, run_pk, sharded
from runtime.store.dynamodb_layout import WORKFLOWS_PK
from runtime.testing import AwsPlatform
from tests.support.aws_items import run_item
from tests.support.moto_table import store_table
from tests.support.older_layout import written_by_older_code

TABLE = "lunaflow"
STATUSES = Path(__file__).resolve().parents[1] / "projects" / "aws_statuses"


@pytest.fixture
def store() -> Iterator[DynamoDBStore]:
    with store_table(TABLE) as client:
        yield DynamoDBStore(client, TABLE)


def _new(store: DynamoDBStore, run_id: str, at: float, workflow: str = "wf") -> None:
    store.create_run(
        RunRecord(
            id=run_id, workflow=workflow, status=Status.RUNNING, input={}, created_at=at, updated_at=at
        ),
        Entry(1, Kind.STARTED, workflow, {"input": {}}, at),
    )


def _complete(store: DynamoDBStore, run_id: str, workflow: str | None = "wf") -> None:
    store.append(
        run_id,
        1,
        [Entry(2, Kind.COMPLETED, None, {"result": run_id}, 5_000.0)],
        update=RunUpdate(Status.COMPLETED, None, result=run_id, workflow=workflow),
    )


def _item(store: DynamoDBStore, run_id: str) -> dict[str, Any]:
    got = store._db.get_item(TableName=TABLE, Key={"pk": {"S": run_pk(run_id)}, "sk": {"S": RUN_SK}})
    return got["Item"]


def _ids(runs: list[RunRecord]) -> list[str]:
    return [r.id for r in runs]


def test_a_completed_run_leaves_the_status_index_and_its_workflow_is_recorded_once(
    store: DynamoDBStore,
) -> None:
    _new(store, "r1", 1_000.0)
    _new(store, "r2", 1_001.0)
    assert _item(store, "r1")["status_pk"]["S"] == sharded("STATUS#live", "r1")
    updates: list[str] = []  # the partition key of each UpdateItem, in order
    store._db.meta.events.register(
        "provide-client-params.dynamodb.UpdateItem",
        lambda params, **_: updates.append(params["Key"]["pk"]["S"]),
    )
    _complete(store, "r1")
    _complete(store, "r2")
    # The name is recorded before the first end leaves the status index (an ADD to a set),
    # and not again by this store.
    assert updates == [WORKFLOWS_PK, run_pk("r1"), run_pk("r2")], updates
    item = _item(store, "r1")
    assert item["status"]["S"] == "completed"
    assert "status_pk" not in item  # one index delete, not a move's delete and put
    assert item["workflow_pk"]["S"] == sharded("WF#wf", "r1")  # where it is listed now
    names = store._db.get_item(TableName=TABLE, Key={"pk": {"S": WORKFLOWS_PK}, "sk": {"S": WORKFLOWS_PK}})
    assert names["Item"]["names"]["SS"] == ["wf"]
    assert store.get_run("r1") is not None and store.get_run("r1").result == "r1"  # type: ignore[union-attr]


def test_an_end_that_names_no_workflow_keeps_the_run_in_the_status_index(store: DynamoDBStore) -> None:
    """A writer that does not say the run's workflow cannot record it: the run is left where
    older code put it (``STATUS#completed``), where the lists still find it."""
    _new(store, "r1", 1_000.0)
    _complete(store, "r1", workflow=None)
    assert _item(store, "r1")["status_pk"]["S"] == sharded("STATUS#completed", "r1")
    assert _ids(store.list_runs(status="completed")) == ["r1"]
    assert _ids(store.list_runs()) == ["r1"]


def _mixed(store: DynamoDBStore) -> None:
    """Runs of two workflows in every status, one a second: c* completed, a* awaiting,
    f* failed, x* cancelled."""
    plan = [
        ("c0", "wf", Status.COMPLETED),
        ("a0", "wf", Status.AWAITING),
        ("c1", "other", Status.COMPLETED),
        ("f0", "wf", Status.FAILED),
        ("c2", "wf", Status.COMPLETED),
        ("x0", "other", Status.CANCELLED),
        ("a1", "other", Status.AWAITING),
        ("c3", "other", Status.COMPLETED),
    ]
    for i, (run_id, workflow, status) in enumerate(plan):
        _new(store, run_id, 1_000.0 + i, workflow)
        if status == Status.COMPLETED:
            _complete(store, run_id, workflow)
        else:
            error = "e" if status is Status.FAILED else None
            store.append(run_id, 1, [], update=RunUpdate(status, "wait", error=error))


def test_lists_find_completed_runs_by_their_workflow_and_every_run_once(store: DynamoDBStore) -> None:
    _mixed(store)
    assert _ids(store.list_runs(status="completed")) == ["c3", "c2", "c1", "c0"]
    assert _ids(store.list_runs(status="completed", limit=2)) == ["c3", "c2"]
    assert _ids(store.list_runs(status="completed", workflow="wf")) == ["c2", "c0"]
    assert _ids(store.list_runs(status="completed", workflow="nothing")) == []
    assert _ids(store.list_runs()) == ["c3", "a1", "x0", "c2", "f0", "c1", "a0", "c0"]
    assert _ids(store.list_runs(limit=3)) == ["c3", "a1", "x0"]
    assert _ids(store.list_runs(workflow="other")) == ["c3", "a1", "x0", "c1"]
    assert _ids(store.list_runs(status="awaiting")) == ["a1", "a0"]
    assert _ids(store.list_runs(status="failed")) == ["f0"]
    assert _ids(store.list_runs(status="cancelled")) == ["x0"]
    assert [r.result for r in store.list_runs(status="completed", workflow="other")] == ["c3", "c1"]


def test_a_run_just_completed_and_still_live_to_a_lagging_index_is_listed_once_by_status(
    store: DynamoDBStore,
) -> None:
    """An index is read a moment behind the table: a run completed since may still have its
    live entry. The walk leaves it out of the completed list (it is in a status partition)
    rather than list a run twice or read it wrong; the table says completed, so the list of
    live runs, which reads the run, leaves it out too. A moment later it is listed."""
    _new(store, "r1", 1_000.0)
    _complete(store, "r1")
    key = {"pk": {"S": run_pk("r1")}, "sk": {"S": RUN_SK}}
    store._db.update_item(  # the index's view a moment ago: the live entry not yet removed
        TableName=TABLE,
        Key=key,
        UpdateExpression="SET status_pk = :live",
        ExpressionAttributeValues={":live": {"S": sharded("STATUS#live", "r1")}},
    )
    assert store.list_runs(status="completed") == []
    assert store.list_runs(status="awaiting") == []
    assert _ids(store.list_runs()) == ["r1"]
    store._db.update_item(TableName=TABLE, Key=key, UpdateExpression="REMOVE status_pk")
    assert _ids(store.list_runs(status="completed")) == ["r1"]


def test_runs_older_code_completed_are_listed_beside_the_new_ones(store: DynamoDBStore) -> None:
    """The upgrade: runs ended by the code before this change sit under ``STATUS#completed``
    and their workflows were never recorded; a run older code started and this code ends
    records its workflow then."""
    with written_by_older_code():
        _new(store, "old-done", 1_000.0, "legacy")
        _complete(store, "old-done", "legacy")
        _new(store, "old-open", 1_001.0, "legacy-2")
    assert _item(store, "old-done")["status_pk"]["S"] == sharded("STATUS#completed", "old-done")
    _new(store, "new-done", 1_002.0, "wf")
    _complete(store, "new-done", "wf")
    _complete(store, "old-open", "legacy-2")  # this code ends it
    assert "status_pk" not in _item(store, "old-open")
    fresh = DynamoDBStore(store._db, TABLE)  # a container that has recorded nothing
    assert _ids(fresh.list_runs(status="completed")) == ["new-done", "old-open", "old-done"]
    assert _ids(fresh.list_runs()) == ["new-done", "old-open", "old-done"]
    assert _ids(fresh.list_runs(status="completed", workflow="legacy")) == ["old-done"]
    assert _ids(fresh.list_runs(status="completed", workflow="legacy-2")) == ["old-open"]
    assert fresh.workflow_names() == ["legacy-2", "wf"]


def test_a_list_of_completed_runs_looks_as_deep_as_its_bound(
    store: DynamoDBStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented bound (docs/reliability_limits.md): a list of completed runs looks
    through the newest COMPLETED_SCAN runs of the workflows it lists (or as many as it is
    long), however few match; another workflow's runs in flight do not use it up."""
    _new(store, "o-done", 500.0, "other")
    _complete(store, "o-done", "other")
    for i in range(3):
        _new(store, f"c{i}", 1_000.0 + i)
        _complete(store, f"c{i}")
    for i in range(60):
        _new(store, f"a{i:02d}", 2_000.0 + i)
        _new(store, f"o{i:02d}", 3_000.0 + i, "other")
    monkeypatch.setattr(dynamodb_index, "COMPLETED_SCAN", 50)
    assert store.list_runs(status="completed", limit=5) == []
    assert _ids(store.list_runs(status="completed", limit=130)) == ["c2", "c1", "c0", "o-done"]
    monkeypatch.setattr(dynamodb_index, "COMPLETED_SCAN", 121)  # c2 is the 121st newest
    assert _ids(store.list_runs(status="completed", limit=5)) == ["c2"]
    monkeypatch.setattr(dynamodb_index, "COMPLETED_SCAN", 61)  # and the 61st of workflow wf
    assert store.list_runs(status="completed", limit=5) == []
    assert _ids(store.list_runs(status="completed", workflow="wf", limit=5)) == ["c2"]


def test_a_list_of_completed_runs_stops_where_the_listed_partitions_end(store: DynamoDBStore) -> None:
    """Once the listed workflows' partitions and ``STATUS#completed`` are read to their end,
    the rest of the walk would be other workflows' runs in flight: it stops there, having
    read little of them, and keeps the oldest run it did list."""
    for i in range(400):
        _new(store, f"o{i:03d}", 1_000.0 + i, "other")
    for i in range(3):
        _new(store, f"c{i}", 2_000.0 + i)
        _complete(store, f"c{i}")
    read: list[int] = []
    store._db.meta.events.register(
        "after-call.dynamodb.Query", lambda parsed, **_: read.append(len(parsed.get("Items", [])))
    )
    assert _ids(store.list_runs(status="completed", limit=2)) == ["c2", "c1"]
    assert sum(read) < 100, sum(read)  # the 400 runs in flight are the most of it otherwise
    read.clear()
    assert _ids(store.list_runs(status="completed", limit=5)) == ["c2", "c1", "c0"]
    assert sum(read) < 150, sum(read)


THROTTLED = ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "UpdateItem")
UNREACHABLE = EndpointConnectionError(endpoint_url="https://dynamodb.eu-west-1.amazonaws.com")


@pytest.mark.parametrize("failure", [THROTTLED, UNREACHABLE], ids=["throttled", "unreachable"])
@pytest.mark.parametrize("request_name", ["get_item", "update_item"])
def test_a_completion_that_cannot_record_its_workflow_stays_in_the_status_index(
    store: DynamoDBStore, monkeypatch: pytest.MonkeyPatch, failure: Exception, request_name: str
) -> None:
    """The names' read or write fails (a throttle past botocore's retries, or the network):
    the run completes all the same, under ``STATUS#completed`` as older code left it, and
    is listed."""
    real = getattr(store._db, request_name)

    def failing(**request: Any) -> Any:
        if request["Key"]["pk"]["S"] == WORKFLOWS_PK:
            raise failure
        return real(**request)

    _new(store, "r1", 1_000.0)
    monkeypatch.setattr(store._db, request_name, failing)
    _complete(store, "r1")
    monkeypatch.undo()
    assert store.get_run("r1").status == "completed"  # type: ignore[union-attr]
    assert _item(store, "r1")["status_pk"]["S"] == sharded("STATUS#completed", "r1")
    assert store.workflow_names() == []
    assert _ids(store.list_runs(status="completed")) == ["r1"] == _ids(store.list_runs())


def test_a_store_reads_the_names_again_after_a_while(store: DynamoDBStore) -> None:
    """A table restored (or made again) under its name while a container stays warm has lost
    the names: the container's next completion past WORKFLOWS_RECHECK_S reads them again
    and records its workflow anew, so the runs it completes are listed."""
    clock = FakeClock()
    warm = DynamoDBStore(store._db, TABLE, clock=clock)
    _new(warm, "r1", 1_000.0)
    _complete(warm, "r1")
    key = {"pk": {"S": WORKFLOWS_PK}, "sk": {"S": WORKFLOWS_PK}}
    store._db.delete_item(TableName=TABLE, Key=key)  # the restore
    clock.advance(dynamodb_index.WORKFLOWS_RECHECK_S + 1)
    _new(warm, "r2", 1_001.0)
    _complete(warm, "r2")
    assert warm.workflow_names() == ["wf"]
    assert _ids(store.list_runs(status="completed")) == ["r2", "r1"]


def test_the_aws_platform_lists_completed_runs_through_the_handlers() -> None:
    with AwsPlatform(STATUSES) as p:
        for workflow, data, run_id in [
            ("wait", "ab", "w1"),
            ("nap", None, "n1"),
            ("boom", None, "b1"),
            ("wait", "abc", "w2"),
        ]:
            p.start(workflow, data, id=run_id)
            p.advance("1s")
        assert p.signal("w1", "go", 1) is True
        p.advance("2h")
        assert "status_pk" not in run_item(p, "w1") and "status_pk" not in run_item(p, "n1")
        assert [r.id for r in p.runs(status="completed")] == ["n1", "w1"]
        assert [r.id for r in p.runs(status="awaiting")] == ["w2"]
        assert sorted(r.id for r in p.runs()) == ["b1", "n1", "w1", "w2"]
        assert [r.id for r in p.runs(workflow="wait", status="completed")] == ["w1"]

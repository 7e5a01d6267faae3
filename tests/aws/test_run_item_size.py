"""Issue 31.2 ("Item size"): the run item stays small, whatever the input.

Every write to a run item (its lease, each summary, a signal's number and wake-up) costs
the item's size in KB, and the item used to carry journal entry 1 with the input inline up
to 32 KiB: a run started with a 4 KB input paid 5 write units for each of them. Now an
input whose entry is over ``STARTED_INLINE_BYTES`` is the run's first chunk, written with the
run item in one transaction, and the run item keeps to about 1 KB. Runs written before keep
their inline entry (or its S3 object), and the new code reads and advances them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import LunaflowError
from runtime.store import dynamodb_append
from runtime.store.dynamodb import RUN_SK, run_pk
from runtime.testing import AwsPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_retries"
KIB = 1024


def size(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB bills it (names plus values; these items hold S and N)."""
    return sum(len(k.encode()) + len(str(next(iter(v.values()))).encode()) for k, v in item.items())


class RunItemWrites:
    """Every write the platform makes that touches a run item, with the item's size after."""

    def __init__(self, p: AwsPlatform) -> None:
        self.admin = p.new_clients().dynamodb  # unhooked: its reads are not counted
        self.p = p
        self.sizes: list[tuple[str, int]] = []  # (operation, run item bytes after it)
        self.ops: list[str] = []
        client = p.runtime.store._db
        client.meta.events.register("provide-client-params.dynamodb", self._params)
        client.meta.events.register("after-call.dynamodb", self._after)
        self._pending: list[tuple[str, str]] = []

    def _params(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.ops.append(model.name)
        keys = [params.get("Key"), params.get("Item")]
        keys += [
            next(iter(i.values())).get("Key") or next(iter(i.values())).get("Item")
            for i in params.get("TransactItems", [])
        ]
        for key in keys:
            if key and key.get("sk", {}).get("S") == RUN_SK:
                self._pending.append((model.name, key["pk"]["S"]))

    def _after(self, model: Any, **_: Any) -> None:
        pending, self._pending = self._pending, []
        for op, pk in pending:
            item = self.admin.get_item(
                TableName=self.p.config.table, Key={"pk": {"S": pk}, "sk": {"S": RUN_SK}}, ConsistentRead=True
            ).get("Item")
            if item is not None:
                self.sizes.append((op, size(item)))


@pytest.fixture
def p() -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT) as platform:
        yield platform


def item(p: AwsPlatform, run_id: str, sk: str) -> dict[str, Any] | None:
    got: dict[str, Any] | None = p.clients.dynamodb.get_item(
        TableName=p.config.table, Key={"pk": {"S": run_pk(run_id)}, "sk": {"S": sk}}, ConsistentRead=True
    ).get("Item")
    return got


def test_a_run_with_a_4_kb_input_keeps_its_run_item_within_1_kb_for_its_whole_life(p: AwsPlatform) -> None:
    writes = RunItemWrites(p)
    blob = "x" * (4 * KIB)
    assert p.start("paid-echo", blob, id="big-in").status == "awaiting"
    assert p.signal("big-in", "paid", {"by": "ada"}) is True
    run = p.get("big-in")
    assert (run.status, run.result, run.input) == ("completed", {"input": blob, "by": "ada"}, blob)
    assert len(writes.sizes) >= 5, writes.sizes  # create, leases, summaries, the signal
    assert max(n for _, n in writes.sizes) <= 1024, writes.sizes
    # The start: the run item and the first chunk in one transaction, the entry in the chunk.
    assert writes.ops[0] == "TransactWriteItems"
    run_item = item(p, "big-in", RUN_SK)
    assert run_item is not None and "started" not in run_item and "first" not in run_item
    first = item(p, "big-in", "J#0000000001")
    assert first is not None and json.loads(first["rows"]["L"][0]["S"])[0][1] == "run.started"
    journal = p.journal("big-in")
    assert [e.seq for e in journal] == list(range(1, len(journal) + 1))
    assert journal[0].kind == "run.started" and journal[0].data["input"] == blob


def test_a_small_input_stays_on_the_run_item_and_its_start_is_one_put(p: AwsPlatform) -> None:
    writes = RunItemWrites(p)
    p.start("paid-echo", {"small": True}, id="small-in")
    assert writes.ops[0] == "PutItem"
    run_item = item(p, "small-in", RUN_SK)
    assert run_item is not None and "first" in run_item and "started" not in run_item
    assert item(p, "small-in", "J#0000000001") is None
    assert p.get("small-in").input == {"small": True}


def test_a_list_reads_large_inputs_from_first_chunks_in_one_batch(p: AwsPlatform) -> None:
    for i in range(3):
        p.start("paid-echo", f"{i}" * (2 * KIB), id=f"list-{i}")
    p.restart()  # a container that has read none of them
    ops: list[str] = []
    p.runtime.store._db.meta.events.register(
        "provide-client-params.dynamodb", lambda model, **_: ops.append(model.name)
    )
    runs = {r.id: r for r in p.runs()}
    assert {r: runs[r].input for r in runs} == {f"list-{i}": f"{i}" * (2 * KIB) for i in range(3)}
    # The workflow names' record (one GetItem), the run items, then their first chunks.
    assert ops.count("GetItem") == 1 and ops.count("BatchGetItem") == 2, ops


def test_runs_written_with_the_entry_on_the_run_item_are_read_and_advanced(
    p: AwsPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upgrade: runs a stack started before this change (a 4 KB input inline on the run
    item, as every input up to 32 KiB was) are loaded, listed and finished by the new code."""
    blob = "o" * (4 * KIB)
    with monkeypatch.context() as old_code:
        old_code.setattr(dynamodb_append, "STARTED_INLINE_BYTES", 32 * KIB)
        old_code.setattr(dynamodb_append.Appends, "journal_v2", False)
        assert p.start("paid-echo", blob, id="old-in").status == "awaiting"
    p.restart()
    old = item(p, "old-in", RUN_SK)
    assert old is not None and "started" in old and item(p, "old-in", "J#0000000001") is None
    assert {r.id: r.input for r in p.runs()}["old-in"] == blob
    assert p.signal("old-in", "paid", {"by": "bo"}) is True
    run = p.get("old-in")
    assert (run.status, run.result) == ("completed", {"input": blob, "by": "bo"})
    assert p.journal("old-in")[0].data["input"] == blob


def test_runs_written_with_their_entry_in_s3_are_read_and_advanced(p: AwsPlatform) -> None:
    """The upgrade, for an input over 32 KiB: code before this change put its entry in S3
    (``started_ref`` on the run item). Such an item, made from a run started now with its
    entry inline, is loaded, listed and finished by the new code."""
    blob = "s" * 300
    with pytest.MonkeyPatch.context() as old_code:
        old_code.setattr(dynamodb_append.Appends, "journal_v2", False)
        assert p.start("paid-echo", blob, id="s3-in").status == "awaiting"
    run_item = item(p, "s3-in", RUN_SK)
    assert run_item is not None
    key = p.platform.store.blobs.put("s3-in", "started", run_item["started"]["S"])
    p.clients.dynamodb.update_item(
        TableName=p.config.table,
        Key={"pk": {"S": run_pk("s3-in")}, "sk": {"S": RUN_SK}},
        UpdateExpression="SET started_ref = :k REMOVE started",
        ExpressionAttributeValues={":k": {"S": key}},
    )
    p.restart()
    assert {r.id: r.input for r in p.runs()}["s3-in"] == blob
    assert p.signal("s3-in", "paid", {"by": "cy"}) is True
    run = p.get("s3-in")
    assert (run.status, run.result) == ("completed", {"input": blob, "by": "cy"})


def test_a_run_whose_first_chunk_was_deleted_says_so_and_how_to_restore_it(p: AwsPlatform) -> None:
    """Only something outside lunaflow deletes a journal item: reading the run then fails
    naming the item, the rule and the fix (the table's point-in-time recovery)."""
    assert p.start("paid-echo", "g" * (2 * KIB), id="gone-in").status == "awaiting"
    p.clients.dynamodb.delete_item(
        TableName=p.config.table, Key={"pk": {"S": run_pk("gone-in")}, "sk": {"S": "J#0000000001"}}
    )
    p.restart()  # no entry kept from before
    with pytest.raises(LunaflowError) as e:
        p.get("gone-in")
    said = str(e.value)
    assert "run 'gone-in' has lost its first journal entry" in said
    assert "deleted by lunaflow only with its run item" in said and "point-in-time recovery" in said

"""Issue 15.1: every value the platform accepts is stored on the AWS path.

Inputs, step results, signal payloads and run results are each up to 256 KiB encoded
(``MAX_VALUE_BYTES``), several of them in one journal append; DynamoDB holds at most 400 KB
in an item and 4 MB in a transaction. Each case runs through the Lambda handlers on the
moto server (``AwsPlatform``), and a value over the limit is refused before anything is
written, naming the limit.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Kind
from runtime.core.values import MAX_VALUE_BYTES
from runtime.errors import InvalidInput
from runtime.store.dynamodb import RUN_SK, run_pk
from runtime.testing import AwsPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_values"
KIB = 1024


class Hits:
    """The ``Count`` object stand-in: how often each step body ran."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def __call__(self, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        self.counts[args[0]] += 1
        return []


@pytest.fixture
def hits() -> Hits:
    return Hits()


@pytest.fixture
def p(hits: Hits) -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT, objects=hits) as platform:
        yield platform


def text_of(size: int, mark: str) -> str:
    """A string whose JSON encoding is ``size`` bytes, starting with ``mark``."""
    return mark + "v" * (size - 2 - len(mark))


def stored(p: AwsPlatform, run_id: str) -> list[str]:
    """Every item of the run's partition and every object in the values bucket, as text."""
    db = p.clients.dynamodb
    items = db.query(
        TableName=p.config.table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": run_pk(run_id)}},
        ConsistentRead=True,
    )["Items"]
    texts = [json.dumps(i) for i in items]
    s3 = p.client("s3")
    for o in s3.list_objects_v2(Bucket=p.config.values_bucket).get("Contents", []):
        texts.append(s3.get_object(Bucket=p.config.values_bucket, Key=o["Key"])["Body"].read().decode())
    return texts


def test_an_input_of_199_kib_starts_and_completes(p: AwsPlatform, hits: Hits) -> None:
    """Measured on main: "a 199 KiB input fails the start with a raw ValidationException:
    Item size has exceeded" (the run item held the input twice)."""
    blob = text_of(199 * KIB, "in-")
    run = p.start("echo", blob, id="in-199")
    assert run.status == "completed"
    assert run.input == blob and run.result == blob
    assert hits.counts["copy"] == 1


def test_a_step_result_at_the_limit_that_is_also_the_run_result_completes(p: AwsPlatform, hits: Hits) -> None:
    """Measured on main: "a 250 KiB step result that is also the run's result fails after
    the step's intent was written"."""
    n = MAX_VALUE_BYTES - 4  # a step's values encode as a list: ["r...r"] is exactly the limit
    run = p.start("big-result", {"n": n}, id="res-256")
    assert run.status == "completed"
    assert run.result == "r" * n
    assert hits.counts["make"] == 1
    results = [e for e in p.journal("res-256") if e.kind == Kind.STEP_RESULT]
    assert [len(e.data["values"][0]) for e in results] == [n]


def test_input_and_result_of_140_kib_each_complete_with_the_step_run_once(p: AwsPlatform, hits: Hits) -> None:
    """Measured on main: "140 KiB input + 140 KiB result wrote the chunk, then failed the
    run-item update, leaving the journal completed and the run running, so the reconciler
    re-woke it each minute and the step body ran 4 times"."""
    blob = text_of(140 * KIB, "both-")
    run = p.start("echo", blob, id="both-140")
    p.advance("5m")  # the reconciler had re-woken it four times by now
    run = p.get("both-140")
    assert (run.status, run.result) == ("completed", blob)
    assert p.journal("both-140")[-1].kind == Kind.COMPLETED
    assert hits.counts["copy"] == 1


def test_several_values_at_the_limit_in_one_append_are_stored(p: AwsPlatform, hits: Hits) -> None:
    """One append holds the step's result, three signal payloads consumed by `all` and the
    run's result: about 1.25 MB, over an item and under a transaction."""
    n = MAX_VALUE_BYTES - 4
    p.start("many", {"n": n, "tail": n - 6}, id="many-1")
    payloads = {name: text_of(MAX_VALUE_BYTES, f"{name}-") for name in ("x", "y", "z")}
    for name, payload in payloads.items():
        assert p.signal("many-1", name, payload) is True
    assert p.signal("many-1", "go") is True
    run = p.get("many-1")
    assert run.status == "completed"
    assert run.result == "t" * (n - 6) + str(n)
    done = {e.data["signal"]: e.data["payload"] for e in p.journal("many-1") if e.kind == Kind.WAIT_DONE}
    assert done == {**payloads, "go": None}
    assert hits.counts["make"] == 1


def test_no_value_is_stored_twice(p: AwsPlatform) -> None:
    """ "Store no value twice": the input, a signal payload and the result each appear once
    across the run's items and objects (main kept the input as `input` and in `started`,
    and a consumed payload in its signal item and in the journal)."""
    marks = {k: f"{k}-{uuid.uuid4().hex}" for k in ("input", "payload")}
    p.start("many", {"n": 10, "tail": 3, "mark": marks["input"]}, id="once-1")
    for name in ("x", "y", "z"):
        p.signal("once-1", name, {"mark": marks["payload"] if name == "y" else name})
    p.signal("once-1", "go")
    assert p.get("once-1").status == "completed"
    texts = stored(p, "once-1")
    for what, mark in marks.items():
        assert sum(t.count(mark) for t in texts) == 1, what
    result = p.get("once-1").result
    assert sum(t.count(json.dumps(result)[1:-1]) for t in texts) == 1


def run_item(p: AwsPlatform, run_id: str) -> dict[str, Any] | None:
    found = p.clients.dynamodb.get_item(
        TableName=p.config.table, Key={"pk": {"S": run_pk(run_id)}, "sk": {"S": RUN_SK}}, ConsistentRead=True
    )
    item: dict[str, Any] | None = found.get("Item")
    return item


def test_an_input_over_the_limit_is_refused_before_anything_is_written(p: AwsPlatform) -> None:
    with pytest.raises(InvalidInput, match=r"over the limit of 262144 bytes \(256 KiB\)"):
        p.start("echo", text_of(MAX_VALUE_BYTES + 1, "over-"), id="over-1")
    assert run_item(p, "over-1") is None
    assert p.runs() == []


def test_a_signal_payload_over_the_limit_is_refused_before_anything_is_written(p: AwsPlatform) -> None:
    p.start("many", {"n": 1, "tail": 1}, id="sig-over")
    before = run_item(p, "sig-over")
    with pytest.raises(InvalidInput, match=r"over the limit of 262144 bytes \(256 KiB\)"):
        p.signal("sig-over", "x", text_of(MAX_VALUE_BYTES + 1, "x-"))
    assert run_item(p, "sig-over") == before
    assert [i["sk"]["S"] for i in _partition(p, "sig-over") if i["sk"]["S"].startswith("S#")] == []


def _partition(p: AwsPlatform, run_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = p.clients.dynamodb.query(
        TableName=p.config.table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": run_pk(run_id)}},
        ConsistentRead=True,
    )["Items"]
    return items

"""Issue 31.2: a signal's send reads nothing before its write.

Before, ``Runs.signal`` read the run (to refuse a missing run or one of another workflow)
and its backlog (to refuse a full one early) before the store's numbering write, which makes
all three checks itself: two DynamoDB reads and two round trips per signal for nothing. Now
the write is the check, on both stores, and a refused signal writes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from runtime.core.clock import FakeClock
from runtime.errors import NoSuchRun
from runtime.platform.runs import Runs
from runtime.store.dynamodb import DynamoDBStore, table_definition
from runtime.store.sqlite import SQLiteStore

TABLE = "lunaflow"


class Requests:
    """The DynamoDB operations a client makes, in order."""

    def __init__(self, client: Any) -> None:
        self.ops: list[str] = []
        client.meta.events.register("before-call.dynamodb", self._seen)

    def _seen(self, model: Any, **_: Any) -> None:
        self.ops.append(model.name)


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    os.environ.setdefault("AWS_DEFAULT_REGION", "eu-west-1")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="eu-west-1")
        client.create_table(**table_definition(TABLE))
        yield client


@pytest.fixture(params=["sqlite", "dynamodb"])
def runs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runs]:
    if request.param == "sqlite":
        store: Any = SQLiteStore(tmp_path / "lunaflow.sqlite", synchronous="OFF")
    else:
        store = DynamoDBStore(request.getfixturevalue("dynamodb"), TABLE)
    r = Runs(store, FakeClock())
    r.start("inbox", None, id="b1")
    yield r
    store.close()


def test_a_signal_is_one_numbering_write_and_its_record_with_no_read_before(dynamodb: Any) -> None:
    runs = Runs(DynamoDBStore(dynamodb, TABLE), FakeClock())
    runs.start("inbox", None, id="b1")
    seen = Requests(dynamodb)
    assert runs.signal("b1", "go", {"n": 1}, workflow="inbox") is True
    assert seen.ops == ["UpdateItem", "PutItem"], seen.ops
    [sig] = runs.store.pending_signals("b1")
    assert (sig.name, sig.payload) == ("go", {"n": 1})


def test_a_signal_to_a_missing_run_is_refused_naming_it_and_writes_nothing(runs: Runs) -> None:
    with pytest.raises(NoSuchRun, match="^no run 'nope'$"):
        runs.signal("nope", "go", 1)
    with pytest.raises(NoSuchRun, match="^no run 'nope' of workflow 'inbox'$"):
        runs.signal("nope", "go", 1, workflow="inbox")
    assert runs.store.get_run("nope") is None
    assert runs.store.signals("nope") == []


def test_a_signal_through_another_workflows_handle_is_refused_and_writes_nothing(runs: Runs) -> None:
    with pytest.raises(NoSuchRun, match="^no run 'b1' of workflow 'other'$"):
        runs.signal("b1", "go", 1, workflow="other")
    assert runs.store.signals("b1") == []
    assert runs.signal("b1", "go", 2, workflow="inbox") is True
    [sig] = runs.store.signals("b1")
    assert (sig.id, sig.payload) == (1, 2)  # the refused send took no number

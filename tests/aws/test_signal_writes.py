"""Issue 31.2: a signal's send reads nothing before its write.

Before, ``Runs.signal`` read the run (to refuse a missing run or one of another workflow)
and its backlog (to refuse a full one early) before the store's numbering write, which makes
all three checks itself: two DynamoDB reads and two round trips per signal for nothing. Now
the write is the check, on both stores, and a refused signal writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.clock import FakeClock
from runtime.errors import NoSuchRun
from runtime.platform.runs import Runs
from runtime.store.dynamodb import DynamoDBStore
from runtime.store.dynamodb_layout import RUN_SIGNAL_BYTES
from runtime.store.sqlite import SQLiteStore
from tests.support.moto_table import Requests, store_table

TABLE = "lunaflow"
LARGE = "x" * RUN_SIGNAL_BYTES  # a signal with it is a numbering and then an item


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with store_table(TABLE) as client:
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
    # The first small one rides on its numbering (test_signal_on_run_item.py); later ones
    # are the numbering and then an item.
    assert runs.signal("b1", "go", {"n": 1}, workflow="inbox") is True
    assert seen.ops == ["UpdateItem"], seen.ops
    assert runs.signal("b1", "go", {"n": 2}, workflow="inbox") is True
    assert seen.ops == ["UpdateItem", "UpdateItem", "PutItem"], seen.ops
    sigs = runs.store.pending_signals("b1")
    assert [(sig.id, sig.name, sig.payload) for sig in sigs] == [(1, "go", {"n": 1}), (2, "go", {"n": 2})]


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


# --- a park that has not seen a signal numbered before it ----------------------------------


def test_a_park_that_has_not_seen_a_numbered_signal_leaves_its_wake_up() -> None:
    """A signal is two writes: its number (with the run's wake-up and a new wake token) and
    its item. An activation whose lease (or load) came after the first and whose load came
    before the second parked as if nothing were pending, and its park dropped the wake-up:
    had the sender's prompt then been lost, the signal stayed pending with nothing to wake
    the run (found reading a stalled torture run, parent-0147). Now a load that finds a
    number without its item leaves the wake-up for the reconciler."""
    from runtime.testing import AwsPlatform

    project = Path(__file__).resolve().parents[1] / "projects" / "aws_eager"
    with AwsPlatform(project) as p:
        p.start("inbox", {"k": 1}, id="race-1")
        assert p.get("race-1").status == "awaiting"
        store = p.platform.store
        raced: list[str] = []

        def between(params: dict[str, Any], **_: Any) -> None:
            if params.get("Item", {}).get("sk", {}).get("S", "").startswith("S#") and not raced:
                raced.append("advanced")  # a worker takes the run between the two writes
                assert p.runtime.advance("race-1") == "done"

        store._db.meta.events.register("provide-client-params.dynamodb.PutItem", between)
        # Over RUN_SIGNAL_BYTES: two writes (a small first signal is one, with no between).
        p.platform.signal("race-1", "go", {"by": "ada", "pad": LARGE})  # its prompt is sent, then lost:
        p.clients.sqs.purge_queue(QueueUrl=p.config.wake_queue_url)
        assert raced and p.get("race-1").status == "awaiting"
        assert [w[0] for w in store.wakeups()] == ["race-1"]  # the wake-up is kept
        p.advance("2m")  # the reconciler re-sends it
        run = p.get("race-1")
        got = {"got": {"by": "ada", "pad": LARGE}, "input": {"k": 1}}
        assert (run.status, run.result) == ("completed", got)


def test_a_number_whose_item_never_came_stops_holding_the_wake_up_after_a_minute() -> None:
    """The sender died between its two writes and its caller (told of the failure) never
    sent again: the number has no item, ever. Parks leave the wake-up for UNSEEN_SIGNAL_MS
    after the number was taken, then drop it, so the run is not woken every few minutes for
    ever."""
    from runtime.testing import AwsPlatform

    project = Path(__file__).resolve().parents[1] / "projects" / "aws_eager"
    with AwsPlatform(project) as p:
        p.start("inbox", {}, id="hole-1")
        store = p.platform.store

        def die(params: dict[str, Any], **_: Any) -> None:
            if params.get("Item", {}).get("sk", {}).get("S", "").startswith("S#"):
                raise ConnectionError("the sender's process died here")

        store._db.meta.events.register("provide-client-params.dynamodb.PutItem", die)
        with pytest.raises(ConnectionError):
            p.platform.signal("hole-1", "go", {"pad": LARGE})  # two writes (above)
        store._db.meta.events.unregister("provide-client-params.dynamodb.PutItem", die)
        assert [w[0] for w in store.wakeups()] == ["hole-1"]
        p.advance("1m")  # a re-sent wake within the minute: the park keeps the wake-up
        assert [w[0] for w in store.wakeups()] == ["hole-1"]
        p.advance("5m")  # past it: the next park drops it, and nothing wakes the run again
        assert store.wakeups() == []
        assert p.get("hole-1").status == "awaiting" and p.platform.store.signals("hole-1") == []

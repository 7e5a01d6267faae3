"""Retention (``[runs] retention``): an ended run is deleted whole once its expiry (its end +
the retention) has passed, on every backend; runs others still need are kept."""

from __future__ import annotations

from runtime.core.clock import FakeClock
from runtime.core.journal import Entry, Kind, Status
from runtime.store.base import RunUpdate, Store
from runtime.store.dynamodb import DynamoDBStore
from tests.contract.test_store import new_run, started

DAY = 86_400.0


def ended(store: Store, run_id: str, status: Status = Status.COMPLETED, *, length: int = 1) -> None:
    kind = Kind.COMPLETED if status == Status.COMPLETED else Kind.CANCELLED
    store.append(
        run_id,
        length,
        [Entry(length + 1, kind, None, {"result": "done"}, 200.0)],
        update=RunUpdate(status, None, result="done"),
    )


def test_an_ended_run_is_deleted_whole_once_its_retention_is_over_and_its_id_then_names_a_new_run(
    store: Store, clock: FakeClock
) -> None:
    store.retention_s = 2 * DAY
    store.create_run(new_run(), started())
    store.add_signal("r1", "paid", {"by": "ada"}, 150.0)
    big = "x" * 100_000  # past what an item holds inline: an S3 object on DynamoDB
    store.append(
        "r1",
        1,
        [
            Entry(2, Kind.VALUE_SET, "stage", {"value": "paid"}, 160.0),
            Entry(3, Kind.STEP_RESULT, "s", {"n": 1, "values": [big]}, 170.0),
        ],
    )
    ended(store, "r1", length=3)
    assert store.get_run("r1").expires_at == clock.now() + 2 * DAY  # type: ignore[union-attr]
    clock.advance(2 * DAY - 1)
    assert store.expire(clock.now()) == []
    assert store.get_run("r1") is not None and len(store.journal("r1")) == 4
    clock.advance(2)
    assert store.expire(clock.now()) == ["r1"]
    assert store.get_run("r1") is None
    assert store.journal("r1") == []
    assert store.signals("r1") == []
    assert store.run_values("r1") == {}
    assert store.expire(clock.now()) == []
    again, created = store.create_run(new_run(at=clock.now()), started(at=clock.now()))
    assert created and again.journal_len == 1
    assert [e.kind for e in store.journal("r1")] == [Kind.STARTED]
    assert store.pending_signals("r1") == []


def test_runs_ended_without_a_retention_failed_runs_and_runs_in_flight_are_kept(
    store: Store, clock: FakeClock
) -> None:
    store.retention_s = None
    store.create_run(new_run("kept"), started())
    ended(store, "kept")
    store.retention_s = DAY
    store.create_run(new_run("failed"), started())
    store.append("failed", 1, [], update=RunUpdate(Status.FAILED, "s", error="boom", at=150.0))
    store.create_run(new_run("sleeping"), started())
    store.append(
        "sleeping", 1, [Entry(2, Kind.WAIT, "sleep", {}, 150.0)], update=RunUpdate(Status.SLEEPING, "sleep")
    )
    assert [store.get_run(r).expires_at for r in ("kept", "failed", "sleeping")] == [None] * 3  # type: ignore[union-attr]
    clock.advance(400 * DAY)
    assert store.expire(clock.now()) == []
    assert {r: store.get_run(r) is not None for r in ("kept", "failed", "sleeping")} == {
        "kept": True,
        "failed": True,
        "sleeping": True,
    }


def test_a_cancelled_run_expires_as_a_completed_one_does(store: Store, clock: FakeClock) -> None:
    store.retention_s = DAY
    store.create_run(new_run(), started())
    ended(store, "r1", Status.CANCELLED)
    clock.advance(DAY + 1)
    assert store.expire(clock.now()) == ["r1"]


def test_a_child_is_kept_while_its_parent_is_in_flight_and_deleted_after_the_parent_ends(
    store: Store, clock: FakeClock
) -> None:
    store.retention_s = DAY
    store.create_run(new_run("parent"), started())
    store.create_run(new_run("child", parent="parent"), started())
    ended(store, "child")
    clock.advance(DAY + 1)
    assert store.expire(clock.now()) == []  # the parent may still read the child's result
    assert store.get_run("child") is not None
    ended(store, "parent")
    clock.advance(DAY + 1)  # the child's put-off (a day) and the parent's retention are over
    assert sorted(store.expire(clock.now())) == ["child", "parent"]


def test_a_run_whose_cancel_cascade_is_unfinished_is_kept(store: Store, clock: FakeClock) -> None:
    store.retention_s = DAY
    store.create_run(new_run(), started())
    store.begin_cancel("r1", clock.now())
    ended(store, "r1", Status.CANCELLED)
    clock.advance(DAY + 1)
    assert store.expire(clock.now()) == []
    store.end_cancel("r1")
    clock.advance(DAY + 1)
    assert store.expire(clock.now()) == ["r1"]


def test_a_sweep_deletes_at_most_its_limit_and_the_next_one_goes_on(store: Store, clock: FakeClock) -> None:
    store.retention_s = DAY
    if isinstance(store, DynamoDBStore):
        store.ttl_runs = False  # runs this simple would be TTL's (tests/aws/test_ttl_expiry.py)
    for i in range(5):
        store.create_run(new_run(f"r{i}"), started())
        ended(store, f"r{i}")
    clock.advance(DAY + 1)
    first = store.expire(clock.now(), limit=3)
    assert len(first) == 3
    assert sorted(first + store.expire(clock.now(), limit=3)) == [f"r{i}" for i in range(5)]


def test_a_parent_is_kept_while_it_has_children_and_deleted_after_they_are_gone(
    store: Store, clock: FakeClock
) -> None:
    """A parent can end before its child (a c:result() timeout, or none at all): the child's
    end still wakes it, and a new run of the parent's id would join the old child (child ids
    derive from the parent's), so the parent is deleted only after its children."""
    store.retention_s = DAY
    store.create_run(new_run("parent"), started())
    store.create_run(new_run("child", parent="parent"), started())
    ended(store, "parent")
    clock.advance(DAY + 1)
    assert store.expire(clock.now()) == []
    assert store.get_run("parent") is not None
    ended(store, "child")  # its end: the parent is still there to be woken
    clock.advance(DAY + 1)  # the child's retention and the parent's day put off are over
    assert store.expire(clock.now()) == ["child", "parent"]  # the child first, then its parent

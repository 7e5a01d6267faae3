"""The worker's lease on a run (DynamoDBStore.acquire_lease / release_lease, AwsRuntime.advance):
one invocation advances a run at a time; parking or ending releases the lease in the same
write; a wake that finds the run busy comes back later and runs nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from runtime.aws.runtime import BUSY_FIRST_S, AwsRuntime
from runtime.core.clock import FakeClock, now_ms
from runtime.store.dynamodb import RUN_SK, run_pk
from runtime.testing import AwsPlatform

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "race_ledger"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def p(clock: FakeClock) -> Iterator[AwsPlatform]:
    """The deployment (on the harness's moto server); the tests make its containers."""
    with AwsPlatform(PROJECT, clock=clock) as p:
        yield p


def container(p: AwsPlatform, clock: FakeClock, owner: str | None = None) -> AwsRuntime:
    """A Lambda container of the deployment: its own clients, Lua state and coroutine cache."""
    return AwsRuntime(p.config, p.new_clients(), clock=clock, owner=owner)


def run_item(p: AwsPlatform, run_id: str) -> dict[str, Any]:
    item = p.clients.dynamodb.get_item(
        TableName=p.config.table, Key={"pk": {"S": run_pk(run_id)}, "sk": {"S": RUN_SK}}, ConsistentRead=True
    )
    return dict(item.get("Item") or {})


def record_calls(client: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every request the client sends from now on: (operation, params)."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def before(model: Any, params: dict[str, Any], **_: Any) -> None:
        calls.append((model.name, params))

    client.meta.events.register("before-parameter-build", before)
    return calls


HELD_MS = 16 * 60 * 1000  # a lease as long as an invocation and its grace


def start_parked(p: AwsPlatform, clock: FakeClock, run_id: str = "r1") -> AwsRuntime:
    """A run of "once" advanced to its wait for "go" by one runtime (returned)."""
    rt = container(p, clock, owner="starter")
    rt.platform.start("once", {"x": 21}, id=run_id)
    assert rt.advance(run_id) == "done"
    assert rt.store.get_run(run_id).status == "awaiting"  # type: ignore[union-attr]
    return rt


def releases(calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The separate lease releases (DynamoDBStore.release_lease) among the calls."""
    return [
        params
        for op, params in calls
        if op == "UpdateItem" and params.get("UpdateExpression") == "REMOVE lease_owner, lease_until"
    ]


def last_write(calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The run item's summary update of the last append among the calls: the update that
    sets the status (in the transaction with the journal chunk)."""
    updates = [params for op, params in calls if op == "UpdateItem"] + [
        item["Update"]
        for op, params in calls
        if op == "TransactWriteItems"
        for item in params["TransactItems"]
        if "Update" in item
    ]
    writes = [
        params
        for params in updates
        if params["Key"]["sk"]["S"] == RUN_SK and "#st = :st" in params.get("UpdateExpression", "")
    ]
    assert writes, [op for op, _ in calls]
    return writes[-1]


def ledger(p: AwsPlatform, run_id: str) -> dict[str, int]:
    return dict(p.runtime.aws_services.objects.state("Ledger", run_id) or {}).get("runs", {})


# --- the store's primitives ------------------------------------------------------------


def test_acquire_on_a_run_nobody_holds_is_ok(p: AwsPlatform, clock: FakeClock) -> None:
    start_parked(p, clock)
    store = container(p, clock).store
    assert store.acquire_lease("r1", "a", now_ms(clock), 60_000) == "ok"
    item = run_item(p, "r1")
    assert item["lease_owner"] == {"S": "a"}
    assert int(item["lease_until"]["N"]) == now_ms(clock) + 60_000


def test_acquire_while_another_owner_holds_a_live_lease_is_busy(p: AwsPlatform, clock: FakeClock) -> None:
    start_parked(p, clock)
    store = container(p, clock).store
    assert store.acquire_lease("r1", "a", now_ms(clock), 60_000) == "ok"
    assert store.acquire_lease("r1", "b", now_ms(clock) + 59_999, 60_000) == "busy"
    assert run_item(p, "r1")["lease_owner"] == {"S": "a"}


def test_acquire_on_a_missing_run_is_missing_and_creates_nothing(p: AwsPlatform, clock: FakeClock) -> None:
    store = container(p, clock).store
    assert store.acquire_lease("nobody", "a", now_ms(clock), 60_000) == "missing"
    assert run_item(p, "nobody") == {}


def test_an_expired_lease_can_be_taken_by_another_owner(p: AwsPlatform, clock: FakeClock) -> None:
    start_parked(p, clock)
    store = container(p, clock).store
    t = now_ms(clock)
    assert store.acquire_lease("r1", "a", t, 1_000) == "ok"
    assert store.acquire_lease("r1", "b", t + 1_000, 1_000) == "busy"  # lease_until is not yet past
    assert store.acquire_lease("r1", "b", t + 1_001, 1_000) == "ok"
    item = run_item(p, "r1")
    assert item["lease_owner"] == {"S": "b"}
    assert int(item["lease_until"]["N"]) == t + 2_001


def test_the_owner_may_take_its_live_lease_again_and_extend_it(p: AwsPlatform, clock: FakeClock) -> None:
    start_parked(p, clock)
    store = container(p, clock).store
    t = now_ms(clock)
    assert store.acquire_lease("r1", "a", t, 1_000) == "ok"
    assert store.acquire_lease("r1", "a", t + 500, 1_000) == "ok"
    assert int(run_item(p, "r1")["lease_until"]["N"]) == t + 1_500
    assert store.acquire_lease("r1", "b", t + 1_200, 1_000) == "busy"


def test_release_frees_the_run_only_for_the_owner(p: AwsPlatform, clock: FakeClock) -> None:
    start_parked(p, clock)
    store = container(p, clock).store
    assert store.acquire_lease("r1", "a", now_ms(clock), 60_000) == "ok"
    store.release_lease("r1", "b")  # not b's: nothing happens
    assert run_item(p, "r1")["lease_owner"] == {"S": "a"}
    store.release_lease("r1", "a")
    item = run_item(p, "r1")
    assert "lease_owner" not in item and "lease_until" not in item
    assert store.acquire_lease("r1", "b", now_ms(clock), 60_000) == "ok"


def test_taking_the_lease_keeps_the_wake_up_until_the_activation_is_done(
    p: AwsPlatform, clock: FakeClock
) -> None:
    """Issue 15.4: a wake-up is cleared by work that finished, not by work that began."""
    rt = container(p, clock)
    rt.platform.start("once", {"x": 1}, id="r1")
    assert "wake_pk" in run_item(p, "r1")  # a new run asks to be advanced
    assert rt.store.acquire_lease("r1", "a", now_ms(clock), 60_000) == "ok"
    assert "wake_pk" in run_item(p, "r1")
    rt.store.release_lease("r1", "a")
    assert rt.advance("r1") == "done"
    assert "wake_pk" not in run_item(p, "r1")
    assert "r1" not in [run for run, _ in rt.store.wakeups()]


# --- AwsRuntime.advance ----------------------------------------------------------------


def test_parking_releases_the_lease_in_the_same_write(p: AwsPlatform, clock: FakeClock) -> None:
    clients = p.new_clients()
    rt = AwsRuntime(p.config, clients, clock=clock, owner="w1")
    rt.platform.start("once", {"x": 21}, id="r1")
    calls = record_calls(clients.dynamodb)
    assert rt.advance("r1") == "done"
    calls = list(calls)
    item = run_item(p, "r1")
    assert item["status"] == {"S": "awaiting"}
    assert "lease_owner" not in item and "lease_until" not in item
    # The lease is taken by the first request (its wake token returned with it) and dropped
    # by the write that parks: no separate release follows it.
    assert calls[0][0] == "UpdateItem" and "lease_owner = :me" in calls[0][1]["UpdateExpression"]
    assert releases(calls) == []
    park = last_write(calls)
    assert park["ExpressionAttributeValues"][":st"] == {"S": "awaiting"}
    assert "lease_owner" in park["UpdateExpression"].split("REMOVE", 1)[1]
    # The next invocation (another container) finds the run free.
    assert container(p, clock, owner="w2").advance("r1") == "done"


def test_ending_the_run_releases_the_lease_in_the_same_write(p: AwsPlatform, clock: FakeClock) -> None:
    start_parked(p, clock)
    clients = p.new_clients()
    rt = AwsRuntime(p.config, clients, clock=clock, owner="w1")
    rt.platform.signal("r1", "go", {"k": 1})
    calls = record_calls(clients.dynamodb)
    assert rt.advance("r1") == "done"
    calls = list(calls)
    run = rt.store.get_run("r1")
    assert run is not None and run.status == "completed" and run.result == {"a": 42, "b": 1}
    item = run_item(p, "r1")
    assert "lease_owner" not in item and "lease_until" not in item
    assert releases(calls) == []
    end = last_write(calls)
    assert end["ExpressionAttributeValues"][":st"] == {"S": "completed"}
    assert "lease_owner" in end["UpdateExpression"].split("REMOVE", 1)[1]
    assert ledger(p, "r1") == {"r1/first/1/1": 1, "r1/after/1/1": 1}


def test_ending_in_the_activation_that_consumes_a_signal_releases_the_lease(
    p: AwsPlatform, clock: FakeClock
) -> None:
    """Consuming the signal, ending the run and dropping the lease are one write (this
    once failed on DynamoDB: the signal was both consumed and set aside in one transaction)."""
    clients = p.new_clients()
    rt = AwsRuntime(p.config, clients, clock=clock, owner="w1")
    rt.platform.start("ends_on_signal", {}, id="r1")
    assert rt.advance("r1") == "done"
    rt.platform.signal("r1", "go", {"k": 1})
    calls = record_calls(clients.dynamodb)
    assert rt.advance("r1") == "done"
    calls = list(calls)
    run = rt.store.get_run("r1")
    assert run is not None and run.status == "completed" and run.result == {"go": {"k": 1}}
    assert "lease_owner" not in run_item(p, "r1")
    assert releases(calls) == []
    assert "lease_owner" in last_write(calls)["UpdateExpression"].split("REMOVE", 1)[1]
    assert [(s.name, s.state) for s in rt.store.signals("r1")] == [("go", "consumed")]


def test_an_advance_that_runs_out_of_time_releases_the_lease_itself(p: AwsPlatform, clock: FakeClock) -> None:
    """Still running (out of time before the Lambda deadline): the lease is released by its
    own write, and the wake is sent again for a fresh invocation."""
    rt = container(p, clock, owner="w1")
    rt.platform.start("once", {"x": 1}, id="r1")
    calls = record_calls(rt.store._db)
    assert rt.advance("r1", remaining_ms=0) == "done"
    assert len(releases(calls)) == 1
    run = rt.store.get_run("r1")
    assert run is not None and run.status == "running"
    item = run_item(p, "r1")
    assert "lease_owner" not in item
    assert ledger(p, "r1") == {}  # nothing ran: the deadline had passed before the first step
    assert container(p, clock, owner="w2").advance("r1") == "done"
    assert rt.store.get_run("r1").status == "awaiting"  # type: ignore[union-attr]
    assert ledger(p, "r1") == {"r1/first/1/1": 1}


def test_an_advance_that_fails_midway_releases_the_lease(p: AwsPlatform, clock: FakeClock) -> None:
    clients = p.new_clients()
    rt = AwsRuntime(p.config, clients, clock=clock, owner="w1")
    rt.platform.start("once", {"x": 1}, id="r1")

    def throttle(model: Any, **_: Any) -> None:
        if model.name in ("TransactWriteItems", "PutItem"):
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}},
                "TransactWriteItems",
            )

    clients.dynamodb.meta.events.register("before-call", throttle)
    with pytest.raises(Exception, match="slow down"):
        rt.advance("r1")
    clients.dynamodb.meta.events.unregister("before-call", throttle)
    assert "lease_owner" not in run_item(p, "r1")
    assert container(p, clock, owner="w2").advance("r1") == "done"
    assert rt.store.get_run("r1").status == "awaiting"  # type: ignore[union-attr]


def test_a_busy_advance_resends_the_wake_with_a_delay_and_runs_nothing(
    p: AwsPlatform, clock: FakeClock
) -> None:
    rt0 = container(p, clock, owner="holder")
    rt0.platform.start("once", {"x": 1}, id="r1")
    assert rt0.store.acquire_lease("r1", "holder", now_ms(clock), HELD_MS) == "ok"
    journal_before = rt0.store.journal("r1")

    clients = p.new_clients()
    rt = AwsRuntime(p.config, clients, clock=clock, owner="late")
    db_calls, sqs_calls = record_calls(clients.dynamodb), record_calls(clients.sqs)
    assert rt.advance("r1") == "busy"

    # The refused lease, then one read of the holder's heartbeat (is it alive?); no journal
    # or summary write.
    assert [op for op, _ in db_calls] == ["UpdateItem", "BatchGetItem"]
    assert [op for op, _ in sqs_calls] == ["SendMessage"]
    sent = sqs_calls[0][1]
    assert sent["QueueUrl"] == p.config.wake_queue_url
    assert sent["DelaySeconds"] == BUSY_FIRST_S > 5
    assert sent["MessageBody"] == '{"run_id":"r1","reason":"busy","tries":1}'
    assert rt0.store.journal("r1") == journal_before
    assert ledger(p, "r1") == {}
    assert run_item(p, "r1")["lease_owner"] == {"S": "holder"}


def test_advance_of_a_missing_run_runs_nothing_and_sends_nothing(p: AwsPlatform, clock: FakeClock) -> None:
    clients = p.new_clients()
    rt = AwsRuntime(p.config, clients, clock=clock, owner="w1")
    db_calls, sqs_calls = record_calls(clients.dynamodb), record_calls(clients.sqs)
    assert rt.advance("nobody") == "missing"
    assert [op for op, _ in db_calls] == ["UpdateItem"]
    assert sqs_calls == []
    assert run_item(p, "nobody") == {}


def test_a_lease_left_by_a_crashed_invocation_expires(p: AwsPlatform, clock: FakeClock) -> None:
    """A holder that never beat (no heartbeat item) keeps its lease until the lease runs out;
    one that beat is taken for dead five seconds after its last beat (test_long_steps.py)."""
    rt0 = container(p, clock, owner="crashed")
    rt0.platform.start("once", {"x": 1}, id="r1")
    assert rt0.store.acquire_lease("r1", "crashed", now_ms(clock), HELD_MS) == "ok"
    rt = container(p, clock, owner="w2")
    assert rt.advance("r1") == "busy"
    clock.advance(HELD_MS / 1000 + 1)
    assert rt.advance("r1") == "done"
    assert rt.store.get_run("r1").status == "awaiting"  # type: ignore[union-attr]
    assert ledger(p, "r1") == {"r1/first/1/1": 1}


def test_a_wake_for_an_ended_run_leaves_its_lease_free(p: AwsPlatform, clock: FakeClock) -> None:
    """A late or repeated wake for a completed run is harmless: it takes the lease, finds
    the run ended, and must not keep the run held."""
    rt = start_parked(p, clock)
    rt.platform.signal("r1", "go", {"k": 1})
    assert rt.advance("r1") == "done"
    assert rt.store.get_run("r1").status == "completed"  # type: ignore[union-attr]
    assert rt.advance("r1") == "done"  # a duplicate delivery
    assert "lease_owner" not in run_item(p, "r1")
    clients = p.new_clients()
    other = AwsRuntime(p.config, clients, clock=clock, owner="w2")
    sqs_calls = record_calls(clients.sqs)
    assert other.advance("r1") == "done"  # another container: not "busy", no wake re-sent
    assert sqs_calls == []


def test_a_resumed_run_is_not_kept_busy_by_a_wake_that_found_it_failed(
    p: AwsPlatform, clock: FakeClock
) -> None:
    rt = container(p, clock, owner="w1")
    rt.platform.start("fails", {}, id="r1")
    assert rt.advance("r1") == "done"
    assert rt.store.get_run("r1").status == "failed"  # type: ignore[union-attr]
    assert rt.advance("r1") == "done"  # a duplicate delivery finds it failed
    rt.platform.resume("r1")
    other = container(p, clock, owner="w2")
    assert other.advance("r1") == "done"
    assert ledger(p, "r1") == {"r1/doomed/1/1": 1, "r1/doomed/1/2": 1}

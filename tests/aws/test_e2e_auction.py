"""The seed's auction, end to end through the Lambda handlers on moto.

The project is examples/auction itself: the seed's workflow, routes and objects.

The project declares ``database "sales"``, which on AWS is Aurora through the RDS Data API;
moto cannot run SQL for that API, so the runtime's ``rds-data`` client is ``FakeRdsData``
(tests/aws/__init__.py): the Data API's ``execute_statement`` / ``begin_transaction`` /
``commit_transaction`` / ``rollback_transaction`` over sqlite3. lunaflow's own
``DataApiDatabases`` (placeholders, migrations, rows) runs unchanged against it.

Everything else is moto: runs, journals, signals and object state in DynamoDB, wakes in
SQS, the 72h timeout in EventBridge Scheduler (fired by tests/support/aws_world.py at the fake
time).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from functions import fetch, worker
from runtime.aws.runtime import AwsRuntime
from runtime.core.clock import FakeClock
from runtime.core.journal import Kind
from tests.support.aws_events import AUCTION, FakeRdsData, http_event
from tests.support.aws_world import (
    AwsWorld,
    FakeContext,
    at_seconds,
    fire_due_schedules,
    queued,
    run_due,
    schedules,
)

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")

PROJECT = AUCTION


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rds() -> FakeRdsData:
    return FakeRdsData()


@pytest.fixture
def rt(make_runtime: Callable[..., AwsRuntime], clock: FakeClock, rds: FakeRdsData) -> AwsRuntime:
    return make_runtime(PROJECT, rds=rds, clock=clock)


def http(method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    answer = fetch.handler(
        http_event(method, path, None if body is None else json.dumps(body)),
        FakeContext(function_name="lunaflow-fetch"),
    )
    text = answer["body"]
    try:
        return answer["statusCode"], json.loads(text)
    except ValueError:
        return answer["statusCode"], text


def sale_state(rds: FakeRdsData, sale: str) -> str:
    [(state,)] = rds.rows("sales", "SELECT state FROM sales WHERE id = ?", sale)
    return str(state)


def test_sale_is_paid_and_settled_through_the_handlers(
    rt: AwsRuntime, aws: AwsWorld, clock: FakeClock, rds: FakeRdsData
) -> None:
    """Issue: "an HTTP start through `fetch.py`, the worker parks the run, an HTTP `pay`
    signal, the worker settles it". Seed: the run races "paid" against "cancelled" with a 72h
    timeout; payment settles the sale."""
    status, body = http("POST", "/api/sale", {"id": "lot-42", "winner": "ada", "price": 25})
    assert (status, body) == (201, {"sale": "lot-42", "run": "sale-lot-42"})
    assert sale_state(rds, "lot-42") == "open"
    assert [m.data for m in queued(aws.wake_queue)] == [{"run_id": "sale-lot-42", "reason": "wake"}]

    # The worker runs "notify" and parks the run on the race, with the 72h timeout scheduled.
    run_due(aws, clock.now(), worker.handler)
    run = rt.platform.get("sale-lot-42")
    assert run.status == "awaiting"
    [timeout] = schedules(aws.scheduler, aws.group)
    assert at_seconds(timeout["ScheduleExpression"]) == clock.now() + 72 * 3600
    notified = aws.dynamodb.get_item(
        TableName=aws.table, Key={"pk": {"S": "OBJ#Account"}, "sk": {"S": "ada"}}
    )["Item"]
    assert json.loads(notified["state"]["S"])["sent"] == [{"kind": "pay-up", "fields": {"price": 25}}]

    status, body = http("GET", "/api/sale/lot-42")
    assert status == 200
    assert body["run"]["status"] == "awaiting" and body["sale"]["state"] == "open"

    # Pay: the pay-sale run charges, signs, and signals "paid" to the sale's run.
    clock.advance(3600)
    status, body = http("POST", "/api/sale/pay", {"id": "lot-42", "user": "ada"})
    assert (status, body) == (202, {"sale": "lot-42", "run": "pay-lot-42"})
    run_due(aws, clock.now(), worker.handler)

    pay = rt.platform.get("pay-lot-42")
    assert pay.status == "completed"
    assert pay.result["receipt"].startswith("rcpt-")
    run = rt.platform.get("sale-lot-42")
    assert run.status == "completed" and run.result == {"outcome": "settled"}
    assert sale_state(rds, "lot-42") == "settled"
    done = [e for e in rt.platform.journal("sale-lot-42") if e.kind == Kind.WAIT_DONE]
    assert done[0].data["by"] == "signal" and done[0].data["signal"] == "paid"
    assert done[0].data["payload"] == {"by": "ada", "receipt": pay.result["receipt"]}

    # The ended run leaves no schedule behind, and nothing is left to deliver.
    assert schedules(aws.scheduler, aws.group) == []
    assert queued(aws.wake_queue) == []
    status, body = http("GET", "/api/sale/lot-42")
    assert body["run"] == {"id": "sale-lot-42", "status": "completed", "result": {"outcome": "settled"}}
    assert body["sale"]["state"] == "settled"

    # The 72h mark passing later changes nothing.
    clock.advance(72 * 3600)
    assert run_due(aws, clock.now(), worker.handler) == 0
    assert rt.platform.get("sale-lot-42").result == {"outcome": "settled"}


def test_unpaid_sale_is_voided_when_the_72h_schedule_fires(
    rt: AwsRuntime, aws: AwsWorld, clock: FakeClock, rds: FakeRdsData
) -> None:
    """Issue: "and the timeout path through a fired schedule". Seed: `if which ~= "paid"`
    the sale is voided and the run returns `{ outcome = "void" }`."""
    assert http("POST", "/api/sale", {"id": "lot-7", "winner": "bo", "price": 9})[0] == 201
    run_due(aws, clock.now(), worker.handler)
    assert rt.platform.get("sale-lot-7").status == "awaiting"

    clock.advance(72 * 3600 - 60)
    assert fire_due_schedules(aws.scheduler, aws.sqs, aws.group, clock.now()) == []
    run_due(aws, clock.now(), worker.handler)
    assert rt.platform.get("sale-lot-7").status == "awaiting"

    clock.advance(60)
    [fired] = fire_due_schedules(aws.scheduler, aws.sqs, aws.group, clock.now())
    assert json.loads(fired["Target"]["Input"])["run_id"] == "sale-lot-7"
    run_due(aws, clock.now(), worker.handler)
    run = rt.platform.get("sale-lot-7")
    assert run.status == "completed" and run.result == {"outcome": "void"}
    assert sale_state(rds, "lot-7") == "void"
    done = [e for e in rt.platform.journal("sale-lot-7") if e.kind == Kind.WAIT_DONE]
    assert done[0].data["by"] == "timeout"

    # A void sale can no longer be paid (the example's route says so).
    status, body = http("POST", "/api/sale/pay", {"id": "lot-7", "user": "bo"})
    assert status == 409 and "void" in body["error"]
    assert schedules(aws.scheduler, aws.group) == []


def test_double_clicked_pay_charges_once(rt: AwsRuntime, aws: AwsWorld, clock: FakeClock) -> None:
    """Seed: "The id is the run's identity, so a retried start joins the run instead of making
    a second one" — two Pay requests through API Gateway make one charge."""
    http("POST", "/api/sale", {"id": "lot-8", "winner": "cy", "price": 40})
    run_due(aws, clock.now(), worker.handler)
    for _ in range(2):
        assert http("POST", "/api/sale/pay", {"id": "lot-8", "user": "cy"})[0] == 202
    run_due(aws, clock.now(), worker.handler)
    assert rt.platform.get("sale-lot-8").result == {"outcome": "settled"}
    status, ledger = http("GET", "/api/payments")
    assert status == 200
    assert len(ledger) == 1
    [receipt] = ledger.values()
    assert receipt["amount"] == 40 and receipt["repeats"] == 0


def test_cancelled_sale_is_voided_and_its_schedule_removed(
    rt: AwsRuntime, aws: AwsWorld, clock: FakeClock, rds: FakeRdsData
) -> None:
    """The race's other branch: a "cancelled" signal over HTTP voids the sale at once."""
    http("POST", "/api/sale", {"id": "lot-9", "winner": "di", "price": 5})
    run_due(aws, clock.now(), worker.handler)
    assert len(schedules(aws.scheduler, aws.group)) == 1
    status, body = http("POST", "/api/sale/cancel", {"id": "lot-9", "user": "di"})
    assert (status, body) == (202, {"sale": "lot-9", "delivered": True})
    run_due(aws, clock.now(), worker.handler)
    assert rt.platform.get("sale-lot-9").result == {"outcome": "void"}
    assert sale_state(rds, "lot-9") == "void"
    assert schedules(aws.scheduler, aws.group) == []


def test_migrations_ran_once_through_the_data_api(rt: AwsRuntime, rds: FakeRdsData) -> None:
    """The example's migrations/sales/001_init.sql ran in a Data API transaction, recorded in
    _lunaflow_migrations."""
    assert rds.rows("sales", "SELECT file FROM _lunaflow_migrations") == [("001_init.sql",)]
    assert rds.transactions == {}


def test_example_migration_with_a_semicolon_in_a_comment_applies_on_aws(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld, rds: FakeRdsData
) -> None:
    """The example project as shipped loads on AWS: its migration (whose first comment holds a
    ';') creates the sales table through the Data API."""
    make_runtime(AUCTION, rds=rds)
    assert rds.rows("sales", "SELECT file FROM _lunaflow_migrations") == [("001_init.sql",)]

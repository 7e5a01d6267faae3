"""Every AWS call a function makes while it runs is one its role allows.

moto allows every call, so a grant the stack forgot shows only on AWS, as an AccessDenied:
a request's eager activation that parked a run on a wait past 15 minutes created the run's
Scheduler schedule from the fetch function, whose role could not (fixed in stop 48). Here
workloads run on ``AwsPlatform`` with every call its clients make recorded against the
function running then (``AwsPlatform.invoking``), and each is checked against the
statements of that function's role in the same project's synthesized stack. Actions are
checked, not resources (tests/infra/test_stack.py checks those for the calls it lists).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import Synth, as_list
from runtime.aws.contract import CONSOLE_TIMEOUT_S, Handler
from runtime.aws.events import http_event
from runtime.testing import AwsPlatform

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")

ROOT = Path(__file__).resolve().parents[2]
ROLES = {Handler.FETCH: "Fetch", Handler.WORKER: "Worker", Handler.QUEUE: "Queue", Handler.CONSOLE: "Console"}
SERVICES = ("dynamodb", "sqs", "scheduler", "s3", "secretsmanager")
# Operations IAM authorizes under another action's name.
RENAMED = {
    "s3:ListObjectsV2": "s3:ListBucket",
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
}
# TransactWriteItems is authorized as each of its items' own action.
TRANSACT = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}


def actions_of(service: str, operation: str, params: dict[str, Any]) -> set[str]:
    if (service, operation) == ("dynamodb", "TransactWriteItems"):
        return {TRANSACT[kind] for item in params.get("TransactItems", []) for kind in item}
    action = RENAMED.get(f"{service}:{operation}", f"{service}:{operation}")
    if service == "scheduler" and operation in ("CreateSchedule", "UpdateSchedule"):
        return {action, "iam:PassRole"}  # the schedule carries the Scheduler role
    return {action}


def record_calls(p: AwsPlatform) -> dict[str, set[str]]:
    """Role name -> the actions its function's calls needed, from now on."""
    made: dict[str, set[str]] = {}
    for service in SERVICES:

        def note(params: dict[str, Any], model: Any, service: str = service, **_: Any) -> None:
            if p.invoking:
                role = ROLES[p.invoking[-1]]
                made.setdefault(role, set()).update(actions_of(service, model.name, params))

        getattr(p.clients, service).meta.events.register(f"before-parameter-build.{service}", note)
    return made


def allowed(synth: Synth, role: str) -> set[str]:
    fn = synth.functions()[role]
    return {a for s in synth.function_statements(fn) if s["Effect"] == "Allow" for a in as_list(s["Action"])}


def check(synth: Synth, made: dict[str, set[str]]) -> None:
    assert made, "the workload made no call inside a function"
    missing = {role: sorted(actions - allowed(synth, role)) for role, actions in made.items()}
    assert {role: m for role, m in missing.items() if m} == {}


def post(p: AwsPlatform, path: str, body: Any) -> dict[str, Any]:
    answer: dict[str, Any] = p.invoke(
        Handler.FETCH, http_event("POST", path, json.dumps(body), now_s=p.now), 29
    )
    p.settle()
    return answer


def run(project: Path, workload: Callable[[AwsPlatform], None]) -> dict[str, set[str]]:
    with AwsPlatform(project) as p:
        made = record_calls(p)
        workload(p)
    return made


def test_the_auctions_calls_are_granted(auction: Synth) -> None:
    """Sales opened, paid, timed out and cancelled, then the console's lists and a run's page."""

    def workload(p: AwsPlatform) -> None:
        assert post(p, "/api/sale", {"id": "lot-1", "winner": "ada", "price": 25})["statusCode"] == 201
        assert post(p, "/api/sale/pay", {"id": "lot-1", "user": "ada"})["statusCode"] == 202
        assert post(p, "/api/sale", {"id": "lot-2", "winner": "bob", "price": 5})["statusCode"] == 201
        assert post(p, "/api/sale", {"id": "lot-3", "winner": "cy", "price": 7})["statusCode"] == 201
        assert post(p, "/api/sale/cancel", {"id": "lot-3", "user": "cy"})["statusCode"] == 202
        p.advance("73h")  # lot-2's timeout fires; the reconciler and the expiry run
        assert p.get("sale-lot-2").status == "completed"
        assert p.get("sale-lot-1").status == "completed"
        # The console widget: every run, the completed ones, one run's page.
        base = json.loads((ROOT / "tests" / "events" / "cw_widget_runs.json").read_text(encoding="utf-8"))
        for event in ({}, {"status": "completed"}, {"view": "run", "run_id": "sale-lot-1"}):
            page = p.invoke(Handler.CONSOLE, {**copy.deepcopy(base), **event}, CONSOLE_TIMEOUT_S)
            assert "sale-lot-1" in str(page)
        # Its cancel button on a sale still waiting (its 72-hour timer's schedule dropped).
        assert post(p, "/api/sale", {"id": "lot-4", "winner": "di", "price": 9})["statusCode"] == 201
        cancel = {"view": "run", "run_id": "sale-lot-4", "action": "cancel"}
        p.invoke(Handler.CONSOLE, {**copy.deepcopy(base), **cancel}, CONSOLE_TIMEOUT_S)
        p.settle()
        assert p.get("sale-lot-4").status == "cancelled"

    made = run(ROOT / "examples" / "auction", workload)
    assert {"Fetch", "Worker", "Console"} <= set(made)
    assert "scheduler:DeleteSchedule" in made["Console"]  # the cancel dropped the timer's schedule
    check(auction, made)


def test_the_calls_of_runs_advanced_where_their_request_lands_are_granted(eager_project: Synth) -> None:
    """The regression: fetch parks ``patient`` on its 2-hour wait and makes its schedule."""

    def workload(p: AwsPlatform) -> None:
        post(p, "/start/patient/pt1", {})
        post(p, "/start/quick/q1", {})
        post(p, "/signal/quick/q1/go", {"n": 1})
        post(p, "/start/inbox/i1", {})
        post(p, "/signal/inbox/i1/go", {"n": 1})
        post(p, "/start/flaky/f1", {})
        post(p, "/signal/flaky/f1/go", {})
        p.advance("3h")
        assert p.get("pt1").status == "completed" and p.get("q1").status == "completed"

    made = run(ROOT / "tests" / "projects" / "aws_eager", workload)
    assert "scheduler:CreateSchedule" in made["Fetch"]
    check(eager_project, made)


def test_the_queue_functions_calls_are_granted(queue_project: Synth) -> None:
    """A user queue's message handled (its handler sends to another queue), one whose handler
    fails (put back with the queue's retry delay), and a run whose step reads a secret."""

    def workload(p: AwsPlatform) -> None:
        p.set_secret("api-key", "k-1")
        emails = p.config.queue_urls["emails"]
        p.clients.sqs.send_message(QueueUrl=emails, MessageBody=json.dumps({"to": "ada"}))
        p.clients.sqs.send_message(QueueUrl=emails, MessageBody=json.dumps(5))  # indexing a number fails
        post(p, "/notify", {"to": "bob"})
        p.advance("10m")
        assert p.get("notify-bob").status == "completed"

    made = run(ROOT / "tests" / "projects" / "infra_queue", workload)
    assert {"sqs:SendMessage", "sqs:ChangeMessageVisibility"} <= made["Queue"]
    assert "secretsmanager:GetSecretValue" in made["Worker"]
    check(queue_project, made)

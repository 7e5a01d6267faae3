"""Issue 31.2 ("activations where the request lands"): a start or a signal that arrives
through the fetch function is advanced in that invocation, as far as a park or an end with
no effect between: no wake message, no worker invocation, no lease write. Anything else (a
step body, a child's start, a gate) is left untouched to the worker, as before.

Each test invokes the fetch handler alone (``AwsPlatform.invoke``, no settling), then looks
at the wake queue and the journal before any worker has run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.aws.contract import FETCH_TIMEOUT_S, Handler
from runtime.aws.events import http_event
from runtime.core.journal import Entry, Kind
from runtime.testing import AwsPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_eager"


@pytest.fixture
def p() -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT) as platform:
        yield platform


def post(p: AwsPlatform, path: str, body: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """The fetch function alone, as API Gateway invokes it: no worker runs after it."""
    event = http_event("POST", path, json.dumps(body), headers, now_s=p.now)
    answer: dict[str, Any] = p.invoke(Handler.FETCH, event, FETCH_TIMEOUT_S)
    return answer


def queued(p: AwsPlatform) -> int:
    """Wake messages waiting for the worker."""
    attributes = p.clients.sqs.get_queue_attributes(
        QueueUrl=p.config.wake_queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesDelayed"]
    )


def kinds(p: AwsPlatform, run_id: str) -> list[str]:
    return [str(e.kind) for e in p.journal(run_id)]


def test_a_start_that_parks_first_is_parked_by_its_own_request(p: AwsPlatform) -> None:
    assert post(p, "/start/inbox/in-1", {"k": 1})["statusCode"] == 201
    assert p.get("in-1").status == "awaiting"
    assert kinds(p, "in-1") == ["run.started", "wait"]
    assert queued(p) == 0  # no wake message: no worker invocation
    assert p.platform.store.wakeups() == []  # the park dropped the start's wake-up
    item = p.clients.dynamodb.get_item(
        TableName=p.config.table, Key={"pk": {"S": "RUN#in-1"}, "sk": {"S": "K"}}, ConsistentRead=True
    )["Item"]
    assert "lease_owner" not in item and "lease_token" not in item  # no lease was written


def test_a_signal_that_ends_its_run_ends_it_in_its_own_request(p: AwsPlatform) -> None:
    post(p, "/start/inbox/in-2", {"k": 2})
    assert post(p, "/signal/inbox/in-2/go", {"by": "ada"})["statusCode"] == 202
    run = p.get("in-2")
    assert (run.status, run.result) == ("completed", {"got": {"by": "ada"}, "input": {"k": 2}})
    assert queued(p) == 0 and p.platform.store.wakeups() == []
    assert kinds(p, "in-2") == ["run.started", "wait", "wait.done", "run.completed"]
    assert [s.state for s in p.platform.store.signals("in-2")] == ["consumed"]


def test_a_start_whose_first_command_is_a_step_is_left_to_the_worker_untouched(p: AwsPlatform) -> None:
    post(p, "/start/stepper/st-1", {})
    assert kinds(p, "st-1") == ["run.started"]  # nothing written: the step is a worker's
    assert queued(p) == 1 and [w[0] for w in p.platform.store.wakeups()] == ["st-1"]
    p.settle()  # the worker: the step, then the park
    assert p.get("st-1").status == "awaiting"
    post(p, "/signal/stepper/st-1/go", {"n": 3})  # no step after the wait: the request ends it
    run = p.get("st-1")
    assert (run.status, run.result) == ("completed", {"a": 1, "got": {"n": 3}})
    assert queued(p) == 0


def test_with_eager_activations_off_every_start_goes_to_the_worker(p: AwsPlatform) -> None:
    p.runtime.eager_ms = 0
    post(p, "/start/inbox/off-1", {})
    assert kinds(p, "off-1") == ["run.started"] and queued(p) == 1
    p.settle()
    assert p.get("off-1").status == "awaiting"


def test_a_request_that_fails_after_its_start_still_advances_the_run(p: AwsPlatform) -> None:
    answer = post(p, "/start/inbox/fail-1", {}, {"x-then-fail": "1"})
    assert answer["statusCode"] == 500
    assert p.get("fail-1").status == "awaiting" and queued(p) == 0


def test_a_step_a_worker_has_begun_is_never_run_by_a_request(p: AwsPlatform) -> None:
    """A worker holds the run mid-step (its intent journaled, its lease live): the signal's
    request replays to that step, leaves it (re-running it is the lease holder's business,
    or a worker's once the lease lapses) and writes nothing."""
    p.runtime.eager_ms = 0
    post(p, "/start/stepper/mid-1", {})
    p.runtime.eager_ms = 1_000
    store = p.platform.store
    intent = {"pass": 1, "attempt": 1, "step_id": "mid-1/a/1/1"}
    store.append("mid-1", 1, [Entry(2, Kind.STEP_INTENT, "a", intent, p.now)])
    store.acquire_lease("mid-1", "another-worker", int(p.now * 1000), 30_000)
    before = p.journal("mid-1")
    post(p, "/signal/stepper/mid-1/go", {"n": 1})
    assert p.journal("mid-1") == before
    assert queued(p) == 2  # the start's wake and the signal's, both for the worker

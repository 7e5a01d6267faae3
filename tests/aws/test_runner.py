"""Issue 31: a run the fetch function began and did not finish (it met a step with no
``timeout``) goes to the runner, an asynchronous invocation of a function of its own, not
to the wake queue (its send, receive and delete: three SQS requests). A refused invocation
falls back to the wake queue; an event Lambda drops (its age past, a failed activation: no
retries) leaves the run's wake-up to the reconciler, as a lost message does; a stack with
no runner (``AwsPlatform(runner=False)``) hands off through the wake queue as before.

The harness plays Lambda's event queue (``runtime.aws.runner_events``): each test invokes
the fetch handler alone, looks at where the wake went, then settles."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from runtime.aws.config import MAX_EAGER_MS
from runtime.aws.contract import FETCH_TIMEOUT_S, WARM_EVENT, WORKER_TIMEOUT_S, Handler
from runtime.aws.events import http_event
from runtime.aws.wake import HAND_OFF, RUNNER_PER_REQUEST
from runtime.testing import AwsPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_eager"
FANIN = Path(__file__).resolve().parents[1] / "projects" / "aws_fanin"


@pytest.fixture
def p() -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT) as platform:
        yield platform


def post(p: AwsPlatform, path: str, body: Any) -> dict[str, Any]:
    """The fetch function alone, as API Gateway invokes it: nothing settles after it."""
    event = http_event("POST", path, json.dumps(body), None, now_s=p.now)
    answer: dict[str, Any] = p.invoke(Handler.FETCH, event, FETCH_TIMEOUT_S)
    return answer


def wake_queue(p: AwsPlatform) -> list[dict[str, Any]]:
    """The wake queue's messages (read, then made visible again)."""
    got = p.clients.sqs.receive_message(
        QueueUrl=p.config.wake_queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0
    ).get("Messages", [])
    return [json.loads(m["Body"]) for m in got]


def leases_by(p: AwsPlatform, run_id: str) -> list[tuple[str, ...]]:
    """The functions running whenever the run's lease is taken from now on."""
    seen: list[tuple[str, ...]] = []

    def note(params: dict[str, Any], **_: Any) -> None:
        if f"RUN#{run_id}" in json.dumps(params.get("Key", {})) and "lease_owner" in str(
            params.get("UpdateExpression", "")
        ):
            seen.append(tuple(str(h) for h in p.invoking))

    p.clients.dynamodb.meta.events.register("before-parameter-build.dynamodb.UpdateItem", note)
    return seen


def test_a_start_that_meets_a_step_with_no_timeout_is_handed_to_the_runner(p: AwsPlatform) -> None:
    leases = leases_by(p, "st-1")
    assert post(p, "/start/stepper/st-1", {})["statusCode"] == 201
    assert p.runner_events is not None and p.runner_events.invoked == 1
    assert wake_queue(p) == []  # no message: the runner was invoked instead
    assert p.get("st-1").status in ("pending", "running")
    p.settle()
    assert p.get("st-1").status == "awaiting"  # step "a" ran, then the run parked on "go"
    assert leases and all(by == (str(Handler.RUNNER),) for by in leases)
    post(p, "/signal/stepper/st-1/go", {"n": 1})  # ends it in the request: no step left
    assert p.get("st-1").status == "completed" and p.runner_events.invoked == 1


def test_a_signal_that_meets_a_step_with_no_timeout_is_handed_to_the_runner(p: AwsPlatform) -> None:
    post(p, "/start/mixed/mx-1", {})
    assert p.get("mx-1").status == "awaiting" and p.runner_events is not None
    assert p.runner_events.invoked == 0  # the start parked in its request
    post(p, "/signal/mixed/mx-1/go", {"n": 4})  # runs step a (500 ms timeout), meets step b
    assert p.runner_events.invoked == 1 and wake_queue(p) == []
    [event] = p.runner_events.take()
    assert event == {"run_id": "mx-1", "reason": HAND_OFF}
    assert p.invoke(Handler.RUNNER, event, WORKER_TIMEOUT_S) == {"advanced": "mx-1"}
    assert p.get("mx-1").result == {"a": 4, "b": 40}


def test_a_refused_invocation_hands_the_run_to_the_wake_queue(
    p: AwsPlatform, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Lambda refuses the invocation (throttled, or the runner not yet deployed): the run
    goes to the wake queue, and the worker advances it."""
    assert p.runner_events is not None

    def refuse(**_: Any) -> dict[str, Any]:
        raise ClientError(
            {"Error": {"Code": "TooManyRequestsException", "Message": "Rate exceeded"}}, "Invoke"
        )

    monkeypatch.setattr(p.runner_events, "invoke", refuse)
    with caplog.at_level("WARNING", logger="lunaflow.aws"):
        post(p, "/start/stepper/st-2", {})
    assert wake_queue(p) == [{"run_id": "st-2", "reason": "wake"}]
    assert "handing run 'st-2' to the runner" in caplog.text and "TooManyRequestsException" in caplog.text
    p.settle()
    assert p.get("st-2").status == "awaiting"


def test_a_hand_off_lambda_dropped_is_re_sent_by_the_reconciler(p: AwsPlatform) -> None:
    """The event is gone (past its age under throttling, or its activation failed: the
    runner has no retries). The run's wake-up, recorded with the start, is the reconciler's:
    it re-sends it through the wake queue, and the worker advances the run."""
    post(p, "/start/stepper/st-3", {})
    assert p.runner_events is not None
    [dropped] = p.runner_events.take()
    assert dropped["run_id"] == "st-3"
    p.settle()
    assert p.get("st-3").status in ("pending", "running")  # nothing else will move it now
    p.advance("3m")
    assert p.get("st-3").status == "awaiting"


def test_a_stack_without_a_runner_hands_off_through_the_wake_queue() -> None:
    with AwsPlatform(PROJECT, runner=False) as p:
        assert p.runner_events is None and p.config.runner_arn is None
        post(p, "/start/stepper/st-4", {})
        assert wake_queue(p) == [{"run_id": "st-4", "reason": "wake"}]
        p.settle()
        assert p.get("st-4").status == "awaiting"


def test_the_runner_drops_an_event_without_a_run(p: AwsPlatform) -> None:
    assert p.invoke(Handler.RUNNER, {"reason": HAND_OFF}, WORKER_TIMEOUT_S) == {"advanced": None}


def test_an_invocation_that_cannot_reach_lambda_hands_the_run_to_the_wake_queue(
    p: AwsPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a refusal but no answer (the endpoint unreachable, a timeout: botocore's own errors):
    the wake queue takes the run, and the wake is counted once."""
    assert p.runner_events is not None

    def unreachable(**_: Any) -> dict[str, Any]:
        raise EndpointConnectionError(endpoint_url="https://lambda.eu-west-1.amazonaws.com")

    monkeypatch.setattr(p.runner_events, "invoke", unreachable)
    before = p.runtime.waker.prompts
    post(p, "/start/stepper/st-5", {})
    assert wake_queue(p) == [{"run_id": "st-5", "reason": "wake"}]
    assert p.runtime.waker.prompts == before + 1
    p.settle()
    assert p.get("st-5").status == "awaiting"


def test_a_parent_woken_by_a_child_a_request_ends_is_woken_through_the_wake_queue() -> None:
    """The child ends in the signal's request; the parent its end wakes is another run, left to
    the wake queue, where one batch serves a parent's many wakes on one thread."""
    with AwsPlatform(FANIN) as p:
        post(p, "/start/parent/pa", {"n": 3})
        p.settle()
        assert p.runner_events is not None
        before = p.runner_events.invoked
        post(p, "/signal/kid/pa-k1/go", {"n": 1})
        assert p.get("pa-k1").status == "completed"
        assert p.runner_events.invoked == before
        assert [m["run_id"] for m in wake_queue(p)] == ["pa"]
        for k in (2, 3):
            post(p, f"/signal/kid/pa-k{k}/go", {"n": k})
        p.settle()
        assert p.get("pa").result == [{"n": 1}, {"n": 2}, {"n": 3}]


def test_children_a_request_s_activation_starts_go_to_the_wake_queue() -> None:
    """The request runs the quick step under its lease, starts five children and ends the
    parent: the children's wakes are the wake queue's, not five invocations of the runner."""
    with AwsPlatform(FANIN) as p:
        p.runtime.eager_ms = MAX_EAGER_MS  # the 300 ms step and five starts fit, however busy the machine
        post(p, "/start/qparent/qp", {"n": 5})
        assert p.get("qp").status == "completed"
        assert p.runner_events is not None and p.runner_events.invoked == 0
        assert sorted(m["run_id"] for m in wake_queue(p)) == [f"qp-k{i}" for i in range(1, 6)]


def test_a_request_that_leaves_many_runs_hands_two_to_the_runner_and_queues_the_rest() -> None:
    with AwsPlatform(FANIN) as p:
        assert post(p, "/startmany/stepfirst/sf/5", {})["statusCode"] == 201
        assert p.runner_events is not None and p.runner_events.invoked == RUNNER_PER_REQUEST == 2
        assert sorted(m["run_id"] for m in wake_queue(p)) == ["sf-3", "sf-4", "sf-5"]
        p.settle()
        assert [p.get(f"sf-{i}").result for i in range(1, 6)] == [1, 2, 3, 4, 5]


def test_runs_a_request_saved_after_a_quick_step_are_handed_off_within_the_same_cap() -> None:
    """Each run's quick step runs in the request, which saves it and hands the run off for the
    step with no timeout. Before, each such run went to the runner at once, outside the
    request's cap: three runs were three invocations."""
    with AwsPlatform(FANIN) as p:
        p.runtime.eager_ms = MAX_EAGER_MS  # three 300 ms steps fit, however busy the machine
        assert post(p, "/startmany/quickfirst/qf/3", {})["statusCode"] == 201
        assert [str(e.kind) for e in p.journal("qf-3")][-2:] == ["step.intent", "step.result"]
        assert p.runner_events is not None and p.runner_events.invoked == RUNNER_PER_REQUEST == 2
        assert [m["run_id"] for m in wake_queue(p)] == ["qf-3"]
        p.settle()
        assert [p.get(f"qf-{i}").result for i in range(1, 4)] == [10, 20, 30]


def test_the_reconcile_rule_s_warm_event_builds_the_runner_s_runtime_and_advances_nothing(
    p: AwsPlatform,
) -> None:
    assert p.invoke(Handler.RUNNER, dict(WARM_EVENT), WORKER_TIMEOUT_S) == {"warm": True}
    assert p.runner_events is not None and p.runner_events.invoked == 0


def test_a_hand_off_inside_a_holding_block_is_collected_not_sent(p: AwsPlatform) -> None:
    """As ``prompt``: a request's runs are advanced after its handler, and sent only then."""
    waker = p.runtime.waker
    with waker.holding() as held:
        waker.hand_off(["h-1", "h-2"])
    assert held == ["h-1", "h-2"]
    assert p.runner_events is not None and p.runner_events.invoked == 0 and wake_queue(p) == []

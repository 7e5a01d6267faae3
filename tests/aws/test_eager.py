"""Issue 31.2 ("activations where the request lands"): a start or a signal that arrives
through the fetch function is advanced in that invocation, as far as a park or an end with
no effect between: no wake message, no worker invocation, no lease write. A step whose
timeout fits the request's budget runs there too, under the lease the request takes at it;
anything else (a step with no timeout or one too long, a child's start, a gate) is left
untouched to the worker, as before.

Each test invokes the fetch handler alone (``AwsPlatform.invoke``, no settling), then looks
at the wake queue and the journal before any worker has run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError

from runtime.aws.config import MAX_EAGER_MS
from runtime.aws.contract import FETCH_TIMEOUT_S, Handler
from runtime.aws.events import http_event
from runtime.core.journal import Entry, Kind
from runtime.engine.executor import Executor
from runtime.testing import AwsPlatform
from tests.support.aws_items import run_item

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_eager"


@pytest.fixture
def p() -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT) as platform:
        yield platform


def post(
    p: AwsPlatform,
    path: str,
    body: Any,
    headers: dict[str, str] | None = None,
    timeout_s: float = FETCH_TIMEOUT_S,
) -> dict[str, Any]:
    """The fetch function alone, as API Gateway invokes it (``timeout_s``: the time the
    invocation has): no worker runs after it."""
    event = http_event("POST", path, json.dumps(body), headers, now_s=p.now)
    answer: dict[str, Any] = p.invoke(Handler.FETCH, event, timeout_s)
    return answer


def queued(p: AwsPlatform) -> int:
    """Wakes waiting for a worker: messages on the wake queue, and the runs a request handed
    to the runner (Lambda's event queue, as the harness plays it)."""
    urls = [p.config.wake_queue_url] + ([p.runner_events.queue_url] if p.runner_events else [])
    waiting = 0
    for url in urls:
        attributes = p.clients.sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"]
        )["Attributes"]
        waiting += int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesDelayed"]
        )
    return waiting


def kinds(p: AwsPlatform, run_id: str) -> list[str]:
    return [str(e.kind) for e in p.journal(run_id)]


def test_a_start_that_parks_first_is_parked_by_its_own_request(p: AwsPlatform) -> None:
    assert post(p, "/start/inbox/in-1", {"k": 1})["statusCode"] == 201
    assert p.get("in-1").status == "awaiting"
    assert kinds(p, "in-1") == ["run.started", "wait"]
    assert queued(p) == 0  # no wake message: no worker invocation
    assert p.platform.store.wakeups() == []  # the park dropped the start's wake-up
    item = run_item(p, "in-1")
    assert "lease_owner" not in item and "lease_token" not in item  # no lease was written


def partition_reads(p: AwsPlatform, run_id: str) -> list[str]:
    """The reads of the run's partition the platform's store makes from now on, by operation."""
    seen: list[str] = []
    pk = f"RUN#{run_id}"

    def note(model: Any, params: dict[str, Any], **_: Any) -> None:
        values = json.dumps(params.get("ExpressionAttributeValues", {})) + json.dumps(params.get("Key", {}))
        if model.name in ("Query", "GetItem") and pk in values:
            seen.append(model.name)

    p.runtime.store._db.meta.events.register("before-parameter-build.dynamodb", note)
    return seen


def test_a_start_that_parks_on_a_long_wait_makes_its_schedule_in_the_fetch_function(p: AwsPlatform) -> None:
    """The request's activation parks the run on a 2-hour timeout, so the fetch function
    creates the run's Scheduler schedule (and passes the Scheduler role): its role must
    allow both (tests/infra/test_stack.py), or on AWS the park fails and the worker redoes it."""
    made: list[list[Handler]] = []
    p.clients.scheduler.meta.events.register(
        "before-call.scheduler.CreateSchedule", lambda **_: made.append(list(p.invoking))
    )
    post(p, "/start/patient/pt1", {})
    assert made == [[Handler.FETCH]]
    assert queued(p) == 0
    assert p.get("pt1").status == "awaiting"
    [summary] = p.clients.scheduler.list_schedules(GroupName=p.config.scheduler_group)["Schedules"]
    assert summary["Name"].startswith("lf-")


def test_a_start_s_own_activation_reads_nothing_back(p: AwsPlatform) -> None:
    """The request that created the run knows it whole: its activation starts from that."""
    reads = partition_reads(p, "in-9")
    assert post(p, "/start/inbox/in-9", {"k": 9})["statusCode"] == 201
    assert reads == []
    assert p.get("in-9").status == "awaiting"
    assert kinds(p, "in-9") == ["run.started", "wait"]
    assert queued(p) == 0


def test_a_start_and_its_signal_in_one_request_end_the_run_there(p: AwsPlatform) -> None:
    """The signal the request sent after the start is read by the run's activation, which
    therefore does not start from what the start wrote."""
    answer = post(p, "/startsignal/inbox/in-10", {"by": "ada"})
    assert (answer["statusCode"], json.loads(answer["body"])) == (201, {"live": True})
    run = p.get("in-10")
    assert (run.status, run.result) == ("completed", {"got": {"by": "ada"}, "input": {}})
    assert queued(p) == 0  # no worker needed


def test_a_run_created_again_under_its_id_is_not_advanced_from_the_old_one_s_start(p: AwsPlatform) -> None:
    """What a request's start wrote is its own activation's to start from, and no later
    request's: a container kept it past a request whose activation did not run (too little
    time left), and a start of the id in a later request, the run deleted and created again
    elsewhere meanwhile, advanced the new run from the old input (found by a review)."""
    old = {"now": True, "tag": "old"}
    assert post(p, "/start/branchy/b-1", old, timeout_s=4.0)["statusCode"] == 201  # not advanced
    assert p.runtime.store._seeded == {}  # what it wrote was its own request's to use
    admin = p.new_clients().dynamodb
    for item in admin.query(
        TableName=p.config.table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "RUN#b-1"}},
    )["Items"]:
        admin.delete_item(TableName=p.config.table, Key={"pk": item["pk"], "sk": item["sk"]})
    elsewhere = p.container(PROJECT, owner="another-container")
    elsewhere.platform.start("branchy", {"now": False, "tag": "new"}, id="b-1")
    assert post(p, "/start/branchy/b-1", {"now": True, "tag": "again"})["statusCode"] == 201
    p.settle()
    run = p.get("b-1")
    assert (run.status, run.current_step) == ("awaiting", "await 'go'")
    assert p.signal("b-1", "go", 1) is True
    assert p.get("b-1").result == {"got": 1, "tag": "new"}


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
    # The message to the worker, and the start's wake-up pending: in no index until the
    # worker's lease (or the reconciler, were the request to die) indexes it.
    assert queued(p) == 1 and p.platform.store.wakeups() == []
    item = run_item(p, "st-1")
    assert "wake_sk" in item and "wake_pk" not in item
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


# --- a step whose timeout fits the request's budget runs where the request lands ----------


@pytest.fixture
def roomy(p: AwsPlatform) -> None:
    """The longest budget a request may have (10 s): whether a 500 ms timeout fits must not
    depend on how busy the machine is."""
    p.runtime.eager_ms = MAX_EAGER_MS


@pytest.mark.usefixtures("roomy")
def test_a_signal_whose_step_fits_the_budget_ends_the_run_in_its_own_request(p: AwsPlatform) -> None:
    """Before: every step body was the worker's, so the signal's request replayed to the
    step, left it, and sent a wake message (a second invocation, its lease and its load)."""
    post(p, "/start/quick/q-1", {})
    assert p.get("q-1").status == "awaiting" and queued(p) == 0
    assert post(p, "/signal/quick/q-1/go", {"n": 4})["statusCode"] == 202
    run = p.get("q-1")
    assert (run.status, run.result) == ("completed", {"n": 5})
    assert queued(p) == 0 and p.platform.store.wakeups() == []  # no worker: no wake message
    ended = ["wait.done", "step.intent", "step.result", "run.completed"]
    assert kinds(p, "q-1") == ["run.started", "wait", *ended]
    assert "lease_owner" not in run_item(p, "q-1")  # the end dropped the lease it took


@pytest.mark.usefixtures("roomy")
def test_a_step_whose_timeout_does_not_fit_the_budget_is_left_to_the_worker(p: AwsPlatform) -> None:
    post(p, "/start/slow/s-1", {})
    post(p, "/signal/slow/s-1/go", {"n": 1})
    assert kinds(p, "s-1") == ["run.started", "wait"]  # nothing written: the step is a worker's
    assert queued(p) == 1 and "lease_owner" not in run_item(p, "s-1")
    p.settle()
    assert p.get("s-1").result == {"n": 2}


@pytest.mark.usefixtures("roomy")
def test_a_step_with_no_timeout_after_a_quick_one_is_left_to_the_worker(p: AwsPlatform) -> None:
    """The request runs the quick step, saves it, drops its lease and prompts the worker,
    which runs the step with no timeout (it could hold the request for as long as it takes)."""
    post(p, "/start/mixed/m-1", {})
    post(p, "/signal/mixed/m-1/go", {"n": 3})
    assert kinds(p, "m-1") == ["run.started", "wait", "wait.done", "step.intent", "step.result"]
    assert p.get("m-1").status == "running" and queued(p) == 1
    assert "lease_owner" not in run_item(p, "m-1")  # free for the worker at once
    p.settle()
    run = p.get("m-1")
    assert (run.status, run.result) == ("completed", {"a": 3, "b": 30})
    assert [e.name for e in p.journal("m-1") if e.kind == Kind.STEP_INTENT] == ["a", "b"]  # each once


@pytest.mark.usefixtures("roomy")
def test_a_quick_step_that_fails_parks_its_run_for_the_backoff_in_the_request(p: AwsPlatform) -> None:
    post(p, "/start/flaky/f-1", {})
    post(p, "/signal/flaky/f-1/go", {})
    run = p.get("f-1")
    assert run.status == "sleeping" and p.platform.store.wakeups() == []
    assert queued(p) == 1  # the backoff's timer (a delayed wake message), no worker prompt
    assert "lease_owner" not in run_item(p, "f-1")
    p.advance(60)
    p.settle()
    assert p.get("f-1").status == "failed"
    assert [str(e.kind) for e in p.journal("f-1")].count("step.intent") == 2


@pytest.mark.usefixtures("roomy")
def test_a_quick_step_is_not_run_by_a_request_while_a_worker_holds_the_run(p: AwsPlatform) -> None:
    """The lease is taken only while free: a live worker's lease leaves the step to it."""
    post(p, "/start/quick/busy-1", {})
    p.platform.store.acquire_lease("busy-1", "another-worker", int(p.now * 1000), 30_000)
    before = p.journal("busy-1")
    post(p, "/signal/quick/busy-1/go", {"n": 1})
    assert p.journal("busy-1") == before
    assert run_item(p, "busy-1")["lease_owner"]["S"] == "another-worker"
    assert queued(p) == 1


def test_a_request_takes_no_lease_after_a_wake_up_its_load_did_not_see(p: AwsPlatform) -> None:
    """The lease's condition is the wake token the eager load read: a signal that came
    between the load and the step moved it, so the request hands the run off."""
    post(p, "/start/quick/tok-1", {})
    store = p.runtime.store
    store.serving_loaded = True
    try:
        assert store.load("tok-1") is not None  # the token as an eager load reads it
        store.add_signal("tok-1", "other", None, p.now, max_backlog=10)  # moves the wake token
        assert not store.take_served_lease("tok-1", "me", int(p.now * 1000), 30_000)
        assert "lease_owner" not in run_item(p, "tok-1")
        assert store.load("tok-1") is not None  # read again: the token now
        assert store.take_served_lease("tok-1", "me", int(p.now * 1000), 30_000)
    finally:
        store.serving_loaded = False
        store.lease_token("tok-1")
    assert run_item(p, "tok-1")["lease_owner"]["S"] == "me"


@pytest.mark.usefixtures("roomy")
def test_a_quick_step_that_never_ends_is_stopped_at_its_timeout_inside_the_request(
    p: AwsPlatform,
) -> None:
    """A body that loops for ever holds the request only for its timeout (200 ms): the
    attempt fails there, as in a worker, and the run fails with the seed's message."""
    post(p, "/start/endless/e-1", {})
    assert post(p, "/signal/endless/e-1/go", {})["statusCode"] == 202
    run = p.get("e-1")
    assert run.status == "failed" and queued(p) == 0
    assert run.error == "step 'spin' failed after 1 attempts: step 'spin' timed out after 200ms"
    assert "lease_owner" not in run_item(p, "e-1")


# --- found by a review: a lease left held, a worker woken before the lease was dropped ---


@pytest.mark.usefixtures("roomy")
def test_a_lease_write_whose_answer_was_lost_is_dropped(
    p: AwsPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lease write committed and its answer never came (botocore gave up): the request
    hands the run off and drops the lease it may hold, so the worker finds the run free."""
    post(p, "/start/quick/lost-1", {})
    store = p.runtime.store
    original = store.take_served_lease

    def committed_then_lost(run_id: str, owner: str, now: int, lease_ms: int) -> bool:
        assert original(run_id, owner, now, lease_ms)
        raise ReadTimeoutError(endpoint_url="dynamodb")

    monkeypatch.setattr(store, "take_served_lease", committed_then_lost)
    post(p, "/signal/quick/lost-1/go", {"n": 1})
    assert "lease_owner" not in run_item(p, "lost-1")
    assert kinds(p, "lost-1") == ["run.started", "wait"] and queued(p) == 1  # handed off untouched
    p.settle()
    assert p.get("lost-1").result == {"n": 2}


@pytest.mark.usefixtures("roomy")
def test_a_retried_lease_write_refused_after_its_first_try_committed_is_dropped(
    p: AwsPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """botocore's retry of a lease write whose first answer was lost fails its condition (a
    signal moved the wake token between the two): refused, though the lease is this
    container's. Before, it stayed held and the worker was told "busy" for 30 s."""
    post(p, "/start/quick/retry-1", {})
    store = p.runtime.store
    original = store.take_served_lease

    def retried(run_id: str, owner: str, now: int, lease_ms: int) -> bool:
        assert original(run_id, owner, now, lease_ms)  # the first try committed
        store.add_signal(run_id, "other", None, p.now, max_backlog=10)
        return original(run_id, owner, now, lease_ms)  # the retry: the token moved, refused

    monkeypatch.setattr(store, "take_served_lease", retried)
    post(p, "/signal/quick/retry-1/go", {"n": 1})
    assert "lease_owner" not in run_item(p, "retry-1")
    worker = p.container(PROJECT, owner="worker-2")
    assert worker.advance("retry-1") == "done"  # the wake the request prompted, at a worker


@pytest.mark.usefixtures("roomy")
def test_the_worker_is_woken_only_after_the_request_dropped_its_lease(
    p: AwsPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "mixed": the request runs step a and hands the run off for step b. A runner invoked at
    once finds the run free (before, the wake went out while the request still
    held the lease: the worker was told "busy" and came back 10 s later)."""
    post(p, "/start/mixed/m-2", {})
    worker = p.container(PROJECT, owner="worker-2")
    assert p.runner_events is not None
    original = p.runner_events.invoke
    answers: list[str] = []

    def invoke(**request: Any) -> dict[str, Any]:
        answer = original(**request)
        if '"m-2"' in str(request["Payload"]) and not answers:
            answers.append(worker.advance("m-2"))  # the runner, invoked at once
        return answer

    monkeypatch.setattr(p.runner_events, "invoke", invoke)
    post(p, "/signal/mixed/m-2/go", {"n": 3})
    assert answers == ["done"]
    assert p.get("m-2").result == {"a": 3, "b": 30}


@pytest.mark.usefixtures("roomy")
def test_a_worker_that_ran_the_step_after_the_request_loaded_the_run_is_not_followed_by_a_second_run(
    p: AwsPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker takes the run between the request's load and its lease, runs the step and
    ends the run, leaving the token as it was and the lease free: the request takes the
    lease, but its intent's journal slot is the worker's, so it stops before the body."""
    post(p, "/start/quick/w-1", {})
    store = p.runtime.store
    original = store.take_served_lease
    worker = p.container(PROJECT, owner="worker-2")
    ran: list[str] = []
    run_step = Executor._run_step

    def counting(self: Executor, s: Any, ex: Any, deadline: Any) -> Any:
        ran.append(ex.name)
        return run_step(self, s, ex, deadline)

    monkeypatch.setattr(Executor, "_run_step", counting)

    def after_worker(run_id: str, owner: str, now: int, lease_ms: int) -> bool:
        assert worker.advance(run_id) == "done"
        return original(run_id, owner, now, lease_ms)

    monkeypatch.setattr(store, "take_served_lease", after_worker)
    post(p, "/signal/quick/w-1/go", {"n": 4})
    assert ran == ["count"]  # the worker's run only
    assert p.get("w-1").status == "completed"
    assert "lease_owner" not in run_item(p, "w-1")
    assert [e.kind for e in p.journal("w-1")].count(Kind.STEP_INTENT) == 1


@pytest.mark.usefixtures("roomy")
def test_a_request_with_under_5s_left_after_its_handler_runs_no_step(
    p: AwsPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The invocation has 7.5 s and its handler takes 3 s, leaving 4.5 s: under the 5 s a
    request keeps for itself, so nothing is advanced there. Before, the budget was counted
    from after the handler against the time left before it, and the step ran."""
    post(p, "/start/quick/late-1", {})
    platform = p.runtime.platform
    original = platform.fetch

    def slow_handler(request: Any, *args: Any, **kwargs: Any) -> Any:
        time.sleep(3.0)  # a handler that waits on a slow API
        return original(request, *args, **kwargs)

    monkeypatch.setattr(platform, "fetch", slow_handler)
    post(p, "/signal/quick/late-1/go", {"n": 1}, timeout_s=7.5)
    assert kinds(p, "late-1") == ["run.started", "wait"] and queued(p) == 1  # the worker's


@pytest.mark.usefixtures("roomy")
def test_a_quick_steps_kv_call_that_hangs_is_cut_at_the_steps_timeout(p: AwsPlatform) -> None:
    """DynamoDB answers the kv read after 6 s: the attempt fails at its 1 s timeout, in
    the request, as an HTTP call would. Before, boto3's request was waited for whole, and
    the step held the request past its timeout and the budget."""
    post(p, "/start/kvquick/kv-1", {})
    slow: list[float] = []

    def hang(request: Any, **_: Any) -> None:
        if b"KV#box" in (request.body or b"") and not slow:
            slow.append(time.monotonic())
            time.sleep(6)

    events = p.runtime.aws_services.kv._db.meta.events
    events.register("before-send.dynamodb.GetItem", hang)
    began = time.monotonic()
    try:
        post(p, "/signal/kvquick/kv-1/go", {})
    finally:
        events.unregister("before-send.dynamodb.GetItem", hang)
    took = time.monotonic() - began
    run = p.get("kv-1")
    assert slow, "the kv read did not go out"
    assert (run.status, run.error) == (
        "failed",
        "step 'read' failed after 1 attempts: step 'read' timed out after 1000ms",
    )
    assert took < 5, f"the request waited {took:.1f} s for a read of 6 s"

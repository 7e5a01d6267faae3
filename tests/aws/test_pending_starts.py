"""Issue 31: a start whose own request advances it writes its wake-up *pending* (the run
item's ``wake_sk`` without ``wake_pk``, so in no index). A park or an end in that request
then writes no index at all: the fan-out run's start costs 2 index WRU instead of 4.

What the index entry was for is kept another way: the reconciler indexes the pending
wake-up of any run still in flight two minutes after its start (its request or the worker
it was handed to died, or its prompt was lost), then sends it on as any lost wake; a signal
indexes it too. A run handed to the worker and parked there within two minutes writes no
wake-up index either.

Each test invokes the fetch handler alone (``AwsPlatform.invoke``), as tests/aws/test_eager.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.aws.config import MAX_EAGER_MS
from runtime.aws.contract import Handler
from runtime.aws.events import http_event
from runtime.aws.runtime import STRANDED_AFTER_S
from runtime.core.clock import now_ms
from runtime.store.base import Lease
from runtime.testing import AwsPlatform
from tests.support.aws_items import run_item

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_eager"
SHORT_S = 4.0  # an invocation with this little left advances nothing: the worker's, prompted
# "stepper" begins with a step with no timeout: its request leaves it to the worker, prompted.


@pytest.fixture
def p() -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT) as platform:
        yield platform


def post(p: AwsPlatform, path: str, body: Any, timeout_s: float = 29.0) -> int:
    event = http_event("POST", path, json.dumps(body), None, now_s=p.now)
    answer: dict[str, Any] = p.invoke(Handler.FETCH, event, timeout_s)
    return int(answer["statusCode"])


def writes_to(p: AwsPlatform, run_id: str) -> list[dict[str, Any]]:
    """The run item writes the platform's store makes from now on (their parameters)."""
    seen: list[dict[str, Any]] = []

    def note(model: Any, params: dict[str, Any], **_: Any) -> None:
        key = params.get("Key") or params.get("Item") or {}
        ours = key.get("pk", {}).get("S") == f"RUN#{run_id}" and key.get("sk", {}).get("S") == "K"
        if model.name in ("PutItem", "UpdateItem") and ours:
            seen.append(json.loads(json.dumps(params, default=str)))

    p.runtime.store._db.meta.events.register("before-parameter-build.dynamodb", note)
    return seen


def move(p: AwsPlatform, seconds: float) -> None:
    """Move the fake clock with no settling: nothing serves a wake meanwhile."""
    p._clock.advance(seconds)  # type: ignore[attr-defined]


def lose_prompts(p: AwsPlatform) -> None:
    """The wake messages are gone, as if the request had died before sending them."""
    p.clients.sqs.purge_queue(QueueUrl=p.config.wake_queue_url)


def test_a_start_parked_by_its_own_request_never_enters_the_wakes_index(p: AwsPlatform) -> None:
    writes = writes_to(p, "in-1")
    assert post(p, "/start/inbox/in-1", {"k": 1}) == 201
    create, park = writes
    assert "wake_sk" in create["Item"] and "wake_pk" not in create["Item"]
    assert "wake_pk" not in park["UpdateExpression"].split("REMOVE")[0]  # nothing indexed by the park
    item = run_item(p, "in-1")
    assert item["status"]["S"] == "awaiting"
    assert "wake_sk" not in item and "wake_pk" not in item  # the park settled it
    assert p.platform.store.wakeups() == []


def test_a_start_from_outside_a_request_is_indexed_as_before(p: AwsPlatform) -> None:
    """A start the request does not advance next (here the harness's own, as the console's
    or a schedule's) keeps its wake-up in the index from its first write."""
    writes = writes_to(p, "in-2")
    p.start("inbox", {"k": 2}, id="in-2")
    create = writes[0]["Item"]
    assert "wake_pk" in create and "wake_sk" in create
    p.settle()
    assert p.get("in-2").status == "awaiting"


def test_a_start_handed_to_a_worker_writes_no_wake_up_index(p: AwsPlatform) -> None:
    """Its request meets a step with no timeout and hands it to the worker, whose lease
    leaves the wake-up pending and whose park removes it: no index written for it."""
    writes = writes_to(p, "st-0")
    assert post(p, "/start/stepper/st-0", {}) == 201
    p.settle()
    assert p.get("st-0").status == "awaiting"
    assert not any("wake_pk" in json.dumps(w.get("Item", {})) for w in writes)
    assert not any("wake_pk =" in w.get("UpdateExpression", "") for w in writes)
    item = run_item(p, "st-0")
    assert "wake_sk" not in item and "wake_pk" not in item


def test_a_worker_that_dies_after_its_lease_is_found_by_the_look(p: AwsPlatform) -> None:
    """The worker takes the handed-off start and dies: its run is running with its wake-up
    still pending, and the reconciler's look at runs two minutes old indexes it, so the
    look at waiting wake-ups sends it on once the lease has lapsed."""
    assert post(p, "/start/stepper/st-1", {}) == 201  # its step: left to the worker
    lose_prompts(p)
    assert p.runtime.store.acquire_lease("st-1", "worker-a", now_ms(p._clock), 30_000) == Lease.OK
    item = run_item(p, "st-1")
    assert item["status"]["S"] == "running" and "wake_sk" in item and "wake_pk" not in item
    p.advance("4m")  # the worker is dead: reconciles index the wake-up, then send the run on
    assert p.get("st-1").status == "awaiting"
    assert [str(e.kind) for e in p.journal("st-1")][-1] == "wait"


def test_a_start_whose_request_died_is_found_and_sent_on_by_the_reconciler(p: AwsPlatform) -> None:
    assert post(p, "/start/stepper/st-2", {}) == 201
    lose_prompts(p)  # the request died after its write, before its prompt
    assert p.platform.store.wakeups() == []
    # Not before the time a request may still be running it (and the index's lag).
    move(p, STRANDED_AFTER_S - 10)
    p.reconcile()
    assert p.runtime.stranded == [] and p.get("st-2").status == "running"
    move(p, 20)
    p.reconcile()
    assert p.runtime.stranded == ["st-2"]
    p.settle()  # the wake the reconciler sent: the step, then the park
    assert p.get("st-2").status == "awaiting"
    assert [str(e.kind) for e in p.journal("st-2")][-1] == "wait"
    move(p, 300)
    p.reconcile()
    assert p.runtime.stranded == []  # looked at once


def test_the_look_for_stranded_starts_goes_on_from_where_it_stopped(p: AwsPlatform) -> None:
    """A look reads at most its budget of runs (a page of 100 at a time), oldest first, and
    marks how far it went: runs started in a burst and still in flight (here 120 parked
    ones) delay a stranded start behind them by a look, never hide it."""
    for i in range(120):
        p.start("inbox", {"k": i}, id=f"old-{i:03d}")
    p.settle()
    move(p, 1)
    ids = [f"st-{i}" for i in range(3)]
    for run_id in ids:
        assert post(p, f"/start/stepper/{run_id}", {}) == 201
    lose_prompts(p)
    store = p.runtime.store
    before = p.now + 1
    assert store.index_stranded_starts(before, budget=100) == []  # the first 100 parked runs
    assert sorted(store.index_stranded_starts(before, budget=100)) == ids  # 20 more, then these
    assert sorted(w[0] for w in store.wakeups()) == ids
    assert store.index_stranded_starts(before, budget=100) == []  # each run looked at once


def test_the_first_look_reads_every_run_in_flight(p: AwsPlatform) -> None:
    """With no mark yet (the first reconcile of a deployment of this code), the look goes
    back to the oldest live run: a start stranded long before it is found too."""
    assert post(p, "/start/stepper/st-old", {}) == 201
    lose_prompts(p)
    move(p, 3600)
    assert p.runtime.store.index_stranded_starts(p.now - STRANDED_AFTER_S) == ["st-old"]


def test_a_failing_look_holds_back_none_of_the_reconciler_s_other_healing(p: AwsPlatform) -> None:
    """The look's mark unreadable (here not a string): the reconcile logs it and goes on
    to re-send the wake-ups that wait."""
    assert post(p, "/start/inbox/in-7", {}) == 201
    p.platform.signal("in-7", "go", {"n": 7})
    lose_prompts(p)  # the signal's prompt: its wake-up waits in the index
    p.clients.dynamodb.put_item(
        TableName=p.config.table, Item={"pk": {"S": "#STARTS"}, "sk": {"S": "#STARTS"}, "swept": {"N": "1"}}
    )
    move(p, 120)
    assert p.reconcile()["rewoken"] == ["in-7"]
    assert p.runtime.stranded == []
    p.settle()
    assert p.get("in-7").status == "completed"


def test_a_request_that_cannot_advance_its_starts_indexes_them(p: AwsPlatform) -> None:
    """With too little time left for its own activations, a request's starts are the
    worker's, indexed as any: a lost prompt is then re-sent after a minute, not three."""
    assert post(p, "/start/inbox/in-5", {}, timeout_s=SHORT_S) == 201
    assert [w[0] for w in p.platform.store.wakeups()] == ["in-5"]
    assert p.runtime.store.pending_starts is False  # and nothing of the request is left on


def test_a_request_that_runs_its_start_s_step_writes_no_wake_up_index(p: AwsPlatform) -> None:
    """A request that runs its start's first step (its timeout fits the budget) takes the
    lease at it and parks the run after: the wake-up was pending all along. Were the request
    to die mid-step, the look would index it (the run is still in flight two minutes on)."""
    p.runtime.eager_ms = MAX_EAGER_MS  # the 500 ms step fits the request, however busy the machine
    writes = writes_to(p, "qf-1")
    assert post(p, "/start/quickfirst/qf-1", {}) == 201
    leases = [w for w in writes if "lease_owner = :me" in w.get("UpdateExpression", "")]
    assert len(leases) == 1 and "wake_pk" not in leases[0]["UpdateExpression"]
    item = run_item(p, "qf-1")
    assert item["status"]["S"] == "awaiting" and "wake_sk" not in item and "wake_pk" not in item
    assert [str(e.kind) for e in p.journal("qf-1")][-1] == "wait"


def test_a_run_settled_before_the_look_is_left_alone(p: AwsPlatform) -> None:
    """A parked run has no pending wake-up: the look reads it and writes nothing."""
    assert post(p, "/start/inbox/in-3", {}) == 201
    writes = writes_to(p, "in-3")
    assert p.runtime.store.index_stranded_starts(p.now + 1) == []
    assert writes == []
    assert p.get("in-3").status == "awaiting"


def test_a_signal_to_a_pending_start_indexes_its_wake_up(p: AwsPlatform) -> None:
    """The signal's write indexes the wake-up it finds pending (keeping its time), so the
    run waits in the index as any signalled run does."""
    assert post(p, "/start/stepper/st-9", {}) == 201
    created_at = run_item(p, "st-9")["wake_sk"]["S"]
    lose_prompts(p)
    move(p, 5)
    p.platform.signal("st-9", "go", {"n": 1})
    item = run_item(p, "st-9")
    assert item["wake_sk"]["S"] == created_at and "wake_pk" in item
    assert [w[0] for w in p.platform.store.wakeups()] == ["st-9"]


def test_a_start_its_request_ran_out_of_time_for_is_indexed_before_its_prompt(p: AwsPlatform) -> None:
    """The request had the time when its handler began (the start is written pending), and
    its handler used it up: the run is the worker's, its wake-up indexed before the prompt,
    so a lost prompt is re-sent after a minute, not two."""
    assert post(p, "/start/inbox/in-6", {}, timeout_s=5.001) == 201  # 1 ms over the spare
    assert [w[0] for w in p.platform.store.wakeups()] == ["in-6"]
    lose_prompts(p)
    p.advance("150s")  # re-sent by the reconcile after the wake-up has waited a minute
    assert p.get("in-6").status == "awaiting"

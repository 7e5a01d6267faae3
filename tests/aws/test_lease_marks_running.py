"""Issue 31.2 ("One write per status change"): a worker's lease marks a woken run running.

Before stop 47 a parked run woken by its signal or its timer wrote its run item three times
in the activation that resumed it: the lease, a summary at its step's intent (status
running), and its park or end. The lease now marks a run in flight running in its own write,
so the activation's load reads it running and the intent is progress, which writes no
summary: two writes. A failed or ended run's lease (a set-aside signal's wake-up) leaves its
status as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from runtime.aws.config import MAX_EAGER_MS
from runtime.aws.contract import FETCH_TIMEOUT_S, Handler
from runtime.aws.events import http_event
from runtime.store.base import Lease
from runtime.store.dynamodb import RUN_SK, run_pk, sharded
from runtime.testing import AwsPlatform
from tests.support.aws_items import run_item
from tests.support.older_layout import written_by_older_code

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_statuses"


@pytest.fixture
def p() -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT) as platform:
        yield platform


class RunItemWrites:
    """Each write the platform's store makes to one run item, named by what it sets, with
    the run's status after it (read by an unhooked client)."""

    def __init__(self, p: AwsPlatform, run_id: str) -> None:
        self.p, self.key = p, {"pk": {"S": run_pk(run_id)}, "sk": {"S": RUN_SK}}
        self.admin = p.new_clients().dynamodb
        self.seen: list[tuple[str, str]] = []
        self.steps: list[str | None] = []  # the run item's current_step after each
        self._pending: str | None = None
        events = p.runtime.store._db.meta.events
        events.register("before-parameter-build.dynamodb", self._before)
        events.register("after-call.dynamodb", self._after)

    def _before(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        self._pending = None
        if model.name in ("PutItem", "UpdateItem") and _key_of(params) == self.key:
            expression = str(params.get("UpdateExpression", "put"))
            self._pending = (
                "lease"
                if "lease_owner = :me" in expression
                else "signal"
                if "signal_seq" in expression
                else "fire"
                if "timer" in expression and "#st" not in expression
                else "journal"  # entries in the run item's head, its summary as it was
                if "summary_at" not in expression and expression != "put"
                else "summary"
            )

    def _after(self, http_response: Any, **_: Any) -> None:
        if self._pending is None or http_response.status_code >= 300:
            return
        item = self.admin.get_item(TableName=self.p.config.table, Key=self.key, ConsistentRead=True)["Item"]
        self.seen.append((self._pending, item["status"]["S"]))
        self.steps.append(item.get("current_step", {}).get("S"))


def _key_of(params: dict[str, Any]) -> dict[str, Any] | None:
    if "Key" in params:
        return {"pk": params["Key"]["pk"], "sk": params["Key"]["sk"]}
    item = params.get("Item", {})
    return {"pk": item["pk"], "sk": item["sk"]} if "pk" in item else None


def test_a_run_woken_by_its_signal_is_running_from_its_lease_to_its_end(p: AwsPlatform) -> None:
    assert p.start("wait", "abc", id="w1").status == "awaiting"
    writes = RunItemWrites(p, "w1")
    assert p.signal("w1", "go", {"by": "ann"}) is True
    run = p.get("w1")
    assert (run.status, run.result) == ("completed", {"got": {"by": "ann"}, "n": 3})
    # The signal's numbering; then the activation: its lease, marking it running, and its
    # end. Its step's intent, in between, wrote only the journal (in the run item's head).
    assert writes.seen == [
        ("signal", "awaiting"),
        ("lease", "running"),
        ("journal", "running"),
        ("summary", "completed"),
    ]
    # The lease dropped the wait the park named: a list shows the run running, no step.
    assert writes.steps[:3] == ["await 'go'", None, None]


def test_a_run_woken_by_its_timer_is_running_from_its_lease(p: AwsPlatform) -> None:
    assert p.start("nap", None, id="n1").status == "sleeping"
    writes = RunItemWrites(p, "n1")
    p.advance("1h")
    assert p.get("n1").result == "rested"
    kinds = [kind for kind, _ in writes.seen]
    assert kinds[-2:] == ["lease", "summary"], writes.seen
    assert writes.seen[-2:] == [("lease", "running"), ("summary", "completed")]
    assert "summary" not in kinds[:-1], writes.seen


def test_an_ended_run_woken_by_a_set_aside_signal_stays_ended(p: AwsPlatform) -> None:
    p.start("wait", "abc", id="w1")
    assert p.signal("w1", "go", 1) is True
    writes = RunItemWrites(p, "w1")
    assert p.signal("w1", "go", 2) is False  # set aside
    p.advance("1m")
    assert p.get("w1").status == "completed"
    # The request's activation found it ended (no lease); a worker's would take the lease
    # alone, its status kept.
    store = p.runtime.store
    assert store.acquire_lease("w1", "a-worker", int(p.now * 1000), 30_000) == Lease.OK
    store.release_lease("w1", "a-worker")
    assert ("lease", "completed") in writes.seen
    assert all(status == "completed" for _, status in writes.seen), writes.seen


def test_a_failed_run_woken_by_a_signal_stays_failed_and_resumes(p: AwsPlatform) -> None:
    assert p.start("boom", None, id="b1").status == "failed"
    writes = RunItemWrites(p, "b1")
    p.signal("b1", "poke", 1)
    p.advance("1m")
    assert p.get("b1").status == "failed"
    assert ("lease", "failed") in writes.seen, writes.seen
    assert all(status == "failed" for _, status in writes.seen), writes.seen


def test_a_request_that_runs_its_run_s_step_marks_it_running_with_the_lease_it_takes() -> None:
    """The signal's request runs the step (its timeout fits the request's budget): the lease
    it takes at the step marks the run running, and the step's intent writes no summary."""
    with AwsPlatform(PROJECT.parent / "aws_eager") as eager:
        # The longest budget a request may have (10 s), as tests/aws/test_eager.py's roomy:
        # whether a 500 ms timeout fits must not depend on how busy the machine is (with the
        # 1 s default it did not fit once on a loaded CI machine, and the worker's turn came).
        eager.runtime.eager_ms = MAX_EAGER_MS
        assert eager.start("quick", None, id="q1").status == "awaiting"
        writes = RunItemWrites(eager, "q1")
        event = http_event("POST", "/signal/quick/q1/go", json.dumps({"n": 1}), None, now_s=eager.now)
        assert eager.invoke(Handler.FETCH, event, FETCH_TIMEOUT_S)["statusCode"] == 202
        assert eager.get("q1").result == {"n": 2}  # no worker ran
        assert writes.seen == [
            ("signal", "awaiting"),
            ("lease", "running"),
            ("journal", "running"),
            ("summary", "completed"),
        ]


def test_a_wake_with_no_wake_up_waiting_leaves_the_run_as_it_was_when_its_activation_fails(
    p: AwsPlatform,
) -> None:
    """A wake come twice (SQS delivers at least once) after the first served the run: its
    lease does not mark the run, so its activation failing leaves it awaiting, as it is,
    and not running with nothing to wake it (found by a review)."""
    assert p.start("wait", "abc", id="w1").status == "awaiting"
    assert "wake_pk" not in run_item(p, "w1")
    writes = RunItemWrites(p, "w1")
    thrown: list[str] = []

    def throttle(**_: Any) -> None:
        if not thrown:
            thrown.append("Query")
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "Query")

    p.clients.dynamodb.meta.events.register("before-call.dynamodb.Query", throttle)
    with pytest.raises(ClientError):
        p.runtime.advance("w1")
    assert thrown == ["Query"]
    assert ("lease", "awaiting") in writes.seen
    assert all(status == "awaiting" for _, status in writes.seen), writes.seen
    p.advance("40m")  # reconciles
    assert p.get("w1").status == "awaiting"
    assert p.signal("w1", "go", 1) is True
    assert p.get("w1").status == "completed"


def test_a_run_older_code_wrote_is_listed_running_while_a_lease_holds_it(p: AwsPlatform) -> None:
    """Its status index entry was under its status (``STATUS#awaiting``): the lease that
    marks it running moves it to the live partition, as its intent's summary did, or a
    list of running runs would miss it while it runs (found by a review)."""
    with written_by_older_code():
        p.start("wait", "abcd", id="old-wait")
    assert run_item(p, "old-wait")["status_pk"]["S"] == sharded("STATUS#awaiting", "old-wait")
    p.restart()  # the new code
    assert p.platform.signal("old-wait", "go", 1) is True  # its wake-up, no worker yet
    store = p.runtime.store
    assert store.acquire_lease("old-wait", "a-worker", int(p.now * 1000), 30_000) == Lease.OK
    assert run_item(p, "old-wait")["status_pk"]["S"] == sharded("STATUS#live", "old-wait")
    assert [r.id for r in p.runs(status="running")] == ["old-wait"]
    assert p.runs(status="awaiting") == []
    store.release_lease("old-wait", "a-worker")
    p.settle()
    assert p.get("old-wait").result == {"got": 1, "n": 4}


def test_a_run_whose_activations_fail_one_after_another_is_running_since_the_first(p: AwsPlatform) -> None:
    """Each lease of a run it has not parked since keeps when it began running, so the
    console's stuck check (``why``) sees how long it has not moved (found by a review: each
    lease rewrote the run's change time)."""
    p.start("wait", "abc", id="w1")
    assert p.platform.signal("w1", "go", 1) is True
    store = p.runtime.store
    first = p.now
    assert store.acquire_lease("w1", "a", int(p.now * 1000), 1_000) == Lease.OK  # then dies
    p._clock.advance(120)  # type: ignore[attr-defined]  # no settling: nothing serves the wake
    assert store.acquire_lease("w1", "b", int(p.now * 1000), 1_000) == Lease.OK  # a's lapsed
    run = p.get("w1")
    assert (run.status, run.updated_at) == ("running", first)
    store.release_lease("w1", "b")
    p.settle()
    run = p.get("w1")
    assert run.status == "completed" and "running_since" not in run_item(p, "w1")

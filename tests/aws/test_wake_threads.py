"""Issue 27.2 on AWS: the worker function advances the wakes of one SQS batch at once (a
map's branches woken together overlap within one invocation as across several), a thread
and a Lua state each, as many as ``LUNAFLOW_WAKE_THREADS`` (the stack deploys 10); one
run's wakes stay on one thread, in order, so no two threads of a container advance one run
(they share the container's lease owner)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from functions._batch import partial_response
from functions.worker import _run_of
from runtime.aws.config import AwsConfig
from runtime.aws.contract import Env
from runtime.core.clock import now_ms
from runtime.errors import LunaflowError
from runtime.store.base import Lease
from runtime.testing import AwsPlatform


def record(i: int, run_id: str) -> dict[str, Any]:
    return {"messageId": f"m{i}", "body": f'{{"run_id":"{run_id}","reason":"wake"}}'}


def test_one_runs_wakes_stay_on_one_thread_in_order_and_other_runs_overlap_with_them() -> None:
    records = [record(1, "a"), record(2, "b"), record(3, "a"), record(4, "a")]
    both = threading.Barrier(2, timeout=10)  # a's first wake and b's meet: they run at once
    seen: list[tuple[str, str]] = []

    def handle(r: dict[str, Any]) -> None:
        run = _run_of(r)
        if r["messageId"] in ("m1", "m2"):
            both.wait()
        seen.append((run, threading.current_thread().name))

    answer = partial_response({"Records": records}, handle, threads=10, key=_run_of)
    assert answer == {"batchItemFailures": []}
    a_threads = {name for run, name in seen if run == "run:a"}
    assert len(a_threads) == 1, "one run's wakes on one thread"
    assert [run for run, _ in seen].count("run:a") == 3


def test_failures_are_reported_in_the_records_order_whatever_thread_failed() -> None:
    records = [record(i, f"r{i}") for i in range(1, 6)]

    def handle(r: dict[str, Any]) -> None:
        if r["messageId"] in ("m2", "m4"):
            raise RuntimeError("this wake failed")

    answer = partial_response({"Records": records}, handle, threads=5, key=_run_of)
    assert answer == {"batchItemFailures": [{"itemIdentifier": "m2"}, {"itemIdentifier": "m4"}]}


def test_a_tick_or_an_unreadable_message_is_a_group_of_its_own() -> None:
    tick = {"messageId": "t1", "body": '{"schedule":"nightly","tick":"2026-01-01T02:00:00Z"}'}
    junk = {"messageId": "j1", "body": "not json"}
    assert _run_of(tick) == "message:t1" and _run_of(junk) == "message:j1"
    assert _run_of(record(1, "x")) == "run:x"


BASE: dict[str, str] = {
    Env.TABLE: "t",
    Env.WAKE_QUEUE_URL: "u",
    Env.WAKE_QUEUE_ARN: "a",
    Env.SCHEDULER_GROUP: "g",
    Env.SCHEDULER_ROLE_ARN: "r",
    Env.VALUES_BUCKET: "b",
}


def test_the_setting_is_read_and_checked() -> None:
    assert AwsConfig.from_env(BASE).wake_threads == 1
    assert AwsConfig.from_env({**BASE, Env.WAKE_THREADS: "10"}).wake_threads == 10
    for bad in ("0", "11", "ten", "-1"):
        with pytest.raises(
            LunaflowError, match=r"LUNAFLOW_WAKE_THREADS=.* is not a whole number from 1 to 10"
        ):
            AwsConfig.from_env({**BASE, Env.WAKE_THREADS: bad})


PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_statuses"


def test_each_thread_of_one_store_keeps_the_wake_token_its_own_lease_was_taken_at() -> None:
    """The threads of one worker container share its store. A lease taken on one thread
    replaced the token another thread's lease kept, so that thread's park no longer dropped
    the wake-up it served: the reconciler re-sent it a minute later, for a second activation
    that found nothing to do."""
    with AwsPlatform(PROJECT) as p:
        for run_id in ("t1", "t2"):
            assert p.start("boom", None, id=run_id).status == "failed"
        store = p.runtime.store
        tokens = {run_id: store.wake_token(run_id) for run_id in ("t1", "t2")}
        both = threading.Barrier(2, timeout=10)  # both leases are taken before either reads
        kept: dict[str, int | None] = {}

        def serve(run_id: str) -> None:
            assert store.acquire_lease(run_id, f"owner-{run_id}", now_ms(store.clock), 60_000) == Lease.OK
            both.wait()
            kept[run_id] = store.lease_token(run_id)

        threads = [threading.Thread(target=serve, args=(run_id,)) for run_id in ("t1", "t2")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert kept == tokens

"""Two workers racing on the same runs, on a moto server process of its own
(``runtime.aws.motoserver``: one request at a time, since moto's own conditional writes are
not atomic under concurrency), in a deployment ``AwsPlatform`` makes.

Each step body counts its run in the Ledger object (tests/projects/race_ledger), outside
the journal; every successful journal write is recorded from both workers' DynamoDB
clients, so a slot written twice would show even though the second write would overwrite
the first in the table.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.aws.motoserver import MotoServer
from runtime.aws.runtime import AwsRuntime
from runtime.core.clock import SystemClock
from runtime.core.journal import Entry, Kind
from runtime.errors import JournalConflict
from runtime.store.base import RunUpdate
from runtime.testing import AwsPlatform

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "race_ledger"
RUNS = 3
STEPS = 3
BUDGET_S = 30.0  # a bound on a hung race, far above the few seconds it takes


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = MotoServer()
    try:
        yield server.endpoint
    finally:
        server.close()


@pytest.fixture
def p(endpoint: str) -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT, endpoint_url=endpoint, clock=SystemClock()) as p:
        yield p


class JournalWrites:
    """Successful journal slot writes: every entry of every journal chunk (sk J#...) in a
    committed PutItem, UpdateItem (a chunk growing in place) or TransactWriteItems, entry 1
    (the run item's creation) and the entries a run item's head takes, seen from the clients
    of every worker."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.slots: Counter[tuple[str, str]] = Counter()

    def watch(self, client: Any) -> None:
        def keep(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
            context["lf_params"] = params

        def count(http_response: Any, context: dict[str, Any], **_: Any) -> None:
            if http_response.status_code >= 300:
                return
            params = context["lf_params"]
            puts = [i.get("Put", {}).get("Item") for i in params.get("TransactItems", [])]
            if "Item" in params:
                puts.append(params["Item"])
            # A chunk growing in place (runtime.store.dynamodb_chunks): its new batch.
            updates = [i.get("Update") for i in params.get("TransactItems", [])]
            if "UpdateExpression" in params:
                updates.append(params)
            with self.lock:
                for put in puts:
                    if put and ("started" in put or "first" in put):  # the run item doubles as entry 1
                        self.slots[(put["pk"]["S"], "J#0000000001")] += 1
                    if put and put["sk"]["S"].startswith("J#"):
                        rows = put.get("rows", {}).get("L")
                        batches = [e["S"] for e in rows] if rows else [put["entries"]["S"]]
                        self.count(put["pk"]["S"], batches)
                for update in updates:
                    sk = (update or {}).get("Key", {}).get("sk", {}).get("S", "")
                    if update and sk.startswith("J#") and "list_append" in update["UpdateExpression"]:
                        batches = [e["S"] for e in update["ExpressionAttributeValues"][":batch"]["L"]]
                        self.count(update["Key"]["pk"]["S"], batches)
                    elif update and ":hbatch" in update.get("ExpressionAttributeValues", {}):
                        # The run item's head (runtime.store.dynamodb_chunks.HEAD): its new batch.
                        batches = [e["S"] for e in update["ExpressionAttributeValues"][":hbatch"]["L"]]
                        self.count(update["Key"]["pk"]["S"], batches)

        for op in ("TransactWriteItems", "PutItem", "UpdateItem"):
            client.meta.events.register(f"before-parameter-build.dynamodb.{op}", keep)
            client.meta.events.register(f"after-call.dynamodb.{op}", count)

    def count(self, pk: str, batches: list[str]) -> None:
        for batch in batches:
            if not batch.startswith("@"):  # an S3 key: the tests' values stay inline
                for entry in json.loads(batch):
                    self.slots[(pk, f"J#{entry[0]:010d}")] += 1

    def of(self, run_id: str) -> dict[int, int]:
        """seq -> how many committed writes put that slot."""
        prefix = f"RUN#{run_id}"
        return {int(sk[2:]): n for (pk, sk), n in self.slots.items() if pk == prefix}


def worker(p: AwsPlatform, owner: str, writes: JournalWrites) -> AwsRuntime:
    """A Lambda container of the deployment with clients of its own, its writes watched."""
    clients = p.new_clients()
    writes.watch(clients.dynamodb)
    return AwsRuntime(p.config, clients, owner=owner)


def race(
    p: AwsPlatform, advance: Callable[[AwsRuntime, str], Any], writes: JournalWrites
) -> tuple[list[str], float]:
    """Start the runs, then two workers advance all of them over and over (from two threads)
    while a third sends each run its "go" signal, until every run has ended."""
    workers = [worker(p, "worker-a", writes), worker(p, "worker-b", writes)]
    front = worker(p, "front", writes)  # the API side: starts and signals
    run_ids = [f"race-{i}" for i in range(RUNS)]
    for run_id in run_ids:
        front.platform.start("chain", {"n": STEPS}, id=run_id)
    done = threading.Event()
    errors: list[BaseException] = []
    t0 = time.monotonic()

    def hammer(rt: AwsRuntime, order: list[str]) -> None:
        try:
            while not done.is_set() and time.monotonic() - t0 < BUDGET_S:
                for run_id in order:
                    advance(rt, run_id)
        except BaseException as e:  # reported by the test
            errors.append(e)
            done.set()

    threads = [
        threading.Thread(target=hammer, args=(workers[0], run_ids), daemon=True),
        threading.Thread(target=hammer, args=(workers[1], list(reversed(run_ids))), daemon=True),
    ]
    for t in threads:
        t.start()
    signalled: set[str] = set()
    while not done.is_set() and time.monotonic() - t0 < BUDGET_S:
        runs = {r: front.store.get_run(r) for r in run_ids}
        for run_id, run in runs.items():
            # Signal once the run has reached its wait, or at once for every other run, so
            # both "arrived before the wait" and "woke a parked run" happen.
            if run_id not in signalled and (run.status == "awaiting" or run_ids.index(run_id) % 2):  # type: ignore[union-attr]
                front.platform.signal(run_id, "go", {"k": run_id})
                signalled.add(run_id)
        if all(r is not None and r.status in ("completed", "cancelled", "failed") for r in runs.values()):
            done.set()
        time.sleep(0.01)
    done.set()
    for t in threads:
        t.join(timeout=BUDGET_S)
    if errors:
        raise errors[0]
    return run_ids, time.monotonic() - t0


def ledger(p: AwsPlatform, run_id: str) -> dict[str, int]:
    return dict(p.runtime.aws_services.objects.state("Ledger", run_id) or {}).get("runs", {})


def check_runs(p: AwsPlatform, writes: JournalWrites, run_ids: list[str]) -> dict[str, Counter[str]]:
    """The checks both races share; returns each run's body runs per step id."""
    store = p.runtime.store
    body_runs: dict[str, Counter[str]] = {}
    for run_id in run_ids:
        run = store.get_run(run_id)
        assert run is not None
        assert run.status == "completed", (run_id, run.status, run.error)
        assert run.result == {
            "total": STEPS * (STEPS + 1) // 2,
            "flaky": "ok after 2",
            "last": run_id,
        }
        journal = store.journal(run_id)
        n = len(journal)
        # The journal is 1..n, and every slot was written by exactly one committed write.
        assert [e.seq for e in journal] == list(range(1, n + 1))
        assert run.journal_len == n
        assert writes.of(run_id) == {seq: 1 for seq in range(1, n + 1)}
        intents = [e.data["step_id"] for e in journal if e.kind == Kind.STEP_INTENT]
        assert len(intents) == len(set(intents)), "two intents for one attempt"
        assert len(intents) == STEPS + 3  # the adds, flaky's two attempts, last
        outcomes = [e for e in journal if e.kind in (Kind.STEP_RESULT, Kind.STEP_FAILED)]
        assert len(outcomes) == len(intents)
        runs = Counter(ledger(p, run_id))
        # No body ran for an attempt the journal does not hold, and every recorded
        # attempt's body ran.
        assert set(runs) == set(intents), (run_id, runs, intents)
        body_runs[run_id] = runs
    return body_runs


def test_two_leased_workers_never_write_a_slot_twice_nor_run_a_body_twice(p: AwsPlatform) -> None:
    """Two workers racing on one run never write two journal entries at one position and
    never run a step body twice for one recorded attempt."""
    writes = JournalWrites()
    run_ids, took = race(p, lambda rt, run_id: rt.advance(run_id), writes)
    body_runs = check_runs(p, writes, run_ids)
    for run_id, runs in body_runs.items():
        assert set(runs.values()) == {1}, f"{run_id}: a body ran twice under the lease: {runs}"
    assert took < BUDGET_S


def test_two_workers_without_the_lease_still_never_write_a_slot_twice(p: AwsPlatform) -> None:
    """The journal's conditional append on its own (the lease bypassed): losers of a race
    get a conflict, so no position is written twice and every run still completes with the
    right result. A body may repeat only in the crash window: a worker that finds an intent
    with no outcome cannot tell a live worker from a dead one, and runs the same attempt
    again under the same step id."""
    writes = JournalWrites()

    def bypass(rt: AwsRuntime, run_id: str) -> Any:
        w = rt.platform.worker
        return w.executor.advance(run_id, w.code)

    run_ids, took = race(p, bypass, writes)
    body_runs = check_runs(p, writes, run_ids)
    repeats = {r: {s: n for s, n in c.items() if n > 1} for r, c in body_runs.items()}
    print(f"race without the lease took {took:.2f}s; repeated bodies (crash window): {repeats}")
    assert took < BUDGET_S


def test_concurrent_appends_at_one_length_let_exactly_one_writer_win(p: AwsPlatform) -> None:
    """The rule "the journal is still N entries long", raced head-on by two threads."""
    writes = JournalWrites()
    stores = [worker(p, f"w{i}", writes).store for i in range(2)]
    front = worker(p, "front", writes)
    front.platform.start("chain", {"n": 1}, id="slots")
    length = 1
    for trial in range(25):
        barrier = threading.Barrier(2)
        outcome: list[str] = ["", ""]

        def write(i: int, length: int, at: float, barrier: threading.Barrier, outcome: list[str]) -> None:
            entry = Entry(length + 1, Kind.VALUE, "os.time", {"value": i}, at)
            barrier.wait()
            try:
                stores[i].append("slots", length, [entry], update=RunUpdate("running"))
                outcome[i] = "won"
            except JournalConflict:
                outcome[i] = "conflict"

        threads = [
            threading.Thread(target=write, args=(i, length, float(trial), barrier, outcome)) for i in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcome) == ["conflict", "won"], (trial, outcome)
        length += 1
    journal = stores[0].journal("slots")
    assert [e.seq for e in journal] == list(range(1, length + 1))
    assert writes.of("slots") == {seq: 1 for seq in range(1, length + 1)}

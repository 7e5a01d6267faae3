"""Issue 24 §7: on AWS, a write that succeeded is never treated as lost.

Each case lets one request commit on the moto server and then loses its answer, so
botocore's own retry sends it again (``tests/support/retries.py``): the retry of a
conditional write then fails its own condition. The store must recognise its own committed
write, never delete an S3 object a committed item points to, and a run whose value is
missing from the bucket must not break listings.
"""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from runtime import cli
from runtime.aws.contract import CONSOLE_TIMEOUT_S, Handler
from runtime.aws.services import DynamoObjects
from runtime.aws.wake import schedule_name
from runtime.core.clock import FakeClock
from runtime.services import effects
from runtime.store.base import Lease
from runtime.store.blobs import run_prefix
from runtime.store.items import whole
from runtime.testing import AwsPlatform
from tests.support.aws_items import run_item
from tests.support.retries import CutAfterCommit, LostAnswers, writes

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_retries"
EVENTS = Path(__file__).resolve().parents[1] / "events"
KIB = 1024


@pytest.fixture
def p() -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT) as platform:
        yield platform


@pytest.fixture
def lost(p: AwsPlatform) -> LostAnswers:
    return LostAnswers(p.clients.dynamodb)


def objects(p: AwsPlatform) -> list[str]:
    found = p.client("s3").list_objects_v2(Bucket=p.config.values_bucket).get("Contents", [])
    return [o["Key"] for o in found]


def test_a_retried_chunk_write_over_64_kib_keeps_its_object(p: AwsPlatform, lost: LostAnswers) -> None:
    """Measured on main: the retry failed its condition, the append dropped the rows'
    object, and every later activation failed with "value ... is missing from bucket". The
    rows go into a chunk (too large for the run item's head: ``runtime.store.dynamodb_chunks``),
    put or grown in place: the retry fails its condition (the key free, or `last = :seen`),
    and the chunk as it is carries the write's own id."""
    lost.lose(
        lambda name, body: (
            writes("PutItem", "batches_ref")(name, body) or writes("UpdateItem", "batches_ref")(name, body)
        )
    )
    n = 70 * KIB
    run = p.start("big-step", {"n": n}, id="chunk-1")
    assert lost.lost, "the chunk's put was not retried"
    assert run.status == "awaiting"
    assert p.signal("chunk-1", "go") is True
    run = p.get("chunk-1")
    assert (run.status, run.result) == ("completed", n)


def test_a_retried_start_with_an_input_over_64_kib_starts_once(p: AwsPlatform, lost: LostAnswers) -> None:
    """Measured on main: the start answered an error and the run could never be read (its
    input's object was deleted). An input this large is the run's first chunk, its text in
    S3, written in one transaction with the run item (issue 31: the run item stays small)."""
    lost.lose(writes("TransactWriteItems", "batches_ref"))
    blob = "i" * (70 * KIB)
    run = p.start("echo", blob, id="input-1")
    assert lost.lost, "the start's put was not retried"
    assert (run.status, run.input, run.result) == ("completed", blob, blob)
    assert [r.id for r in p.runs()] == ["input-1"]


def test_a_retried_signal_with_start_starts_once_with_one_signal(p: AwsPlatform, lost: LostAnswers) -> None:
    """Issue 28.4: the run item and its first signal go in one TransactWriteItems; its
    retry after the commit fails the run item's condition, finds its own write id, and the
    start counts as done: one run, one signal, the input's object (over 64 KiB, the first
    chunk's) kept."""
    lost.lose(writes("TransactWriteItems", "batches_ref"))
    blob = "i" * (70 * KIB)
    run = p.start("paid-echo", blob, id="sws-1", signal="paid", payload={"by": "ada"})
    assert lost.lost, "the signal-with-start transaction was not retried"
    assert (run.status, run.result) == ("completed", {"input": blob, "by": "ada"})
    assert [r.id for r in p.runs()] == ["sws-1"]
    assert [s.state for s in p.platform.store.signals("sws-1")] == ["consumed"]


def test_a_retried_summary_with_an_error_over_32_kib_keeps_its_object(
    p: AwsPlatform, lost: LostAnswers
) -> None:
    """Measured on main: the retried summary failed `summary_at < :at`, its error's object
    was deleted, and the run item could not be read."""
    lost.lose(writes("UpdateItem", "#error_ref = :error"))
    n = 40 * KIB
    p.start("big-error", {"n": n}, id="error-1")
    assert lost.lost, "the summary was not retried"
    run = p.get("error-1")
    assert (run.status, run.error) == ("failed", "e" * n)
    assert "error_ref" in run_item(p, "error-1")


def test_a_run_whose_value_is_missing_is_listed_and_marked(
    p: AwsPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Measured on main: one run's missing object made every listing raise."""
    p.start("echo", "small", id="fine-1")
    p.start("echo", "b" * (70 * KIB), id="broken-1")
    [key] = [k for k in objects(p) if k.startswith(run_prefix("broken-1") + "chunk-1-")]  # its input
    p.platform.store.blobs.delete([key])  # lost from the bucket
    p.restart()  # a container that never read it
    runs = {r.id: r for r in p.runs()}
    assert set(runs) == {"fine-1", "broken-1"}
    assert runs["fine-1"].result == "small"
    broken = runs["broken-1"]
    assert broken.status == "completed"
    assert broken.error is not None and "cannot be read" in broken.error and key in broken.error
    # A completed run whose result's chunk is gone is marked the same way.
    assert p.start("echo", "r" * (70 * KIB), id="chunk-gone").status == "completed"
    chunks = [k for k in objects(p) if "chunk-" in k]
    p.platform.store.blobs.delete(chunks)
    gone = {r.id: r for r in p.runs()}["chunk-gone"]
    assert gone.status == "completed" and gone.error is not None
    assert "cannot be read" in gone.error and any(k in gone.error for k in chunks)
    event = json.loads((EVENTS / "cw_widget_runs.json").read_text(encoding="utf-8"))
    page = p.invoke(Handler.CONSOLE, event, CONSOLE_TIMEOUT_S)
    assert "fine-1" in page and "broken-1" in page and "cannot be read" in page, page[-1500:]
    # `lunaflow runs --aws` draws this listing: the broken run is marked in its table.
    table = Console(width=400, record=True, file=io.StringIO())
    monkeypatch.setattr(cli.output, "out", table)
    args = argparse.Namespace(status=None, workflow=None, limit=50, json=False, where=None)
    assert cli.runs_commands._runs(args, p.platform) == 0
    [line] = [ln for ln in table.export_text().splitlines() if "broken-1" in ln]
    assert "cannot be read" in line, line


def test_a_run_failed_by_a_raise_keeps_no_schedule_or_timer(p: AwsPlatform) -> None:
    """Measured on main: `Executor._raised` saved the failure without clearing the timer, so
    the schedule, `timer_due`, `armed` and the timers index entry outlived the run."""
    p.start("wait-then-raise", None, id="raise-1")
    scheduler = p.clients.scheduler
    group = p.config.scheduler_group
    names = [s["Name"] for s in scheduler.list_schedules(GroupName=group)["Schedules"]]
    assert schedule_name("raise-1") in names
    p.signal("raise-1", "go", {"n": 1})
    run = p.get("raise-1")
    assert (run.status, run.error) == ("failed", "raised after 1")
    names = [s["Name"] for s in scheduler.list_schedules(GroupName=group)["Schedules"]]
    assert schedule_name("raise-1") not in names
    item = run_item(p, "raise-1")
    assert not {"timer_due", "timer_pk", "timer_sk", "armed"} & set(item), json.dumps(item)
    assert p.platform.store.timer("raise-1") is None


class Counter:
    """An object method as the Lua runner answers it: ``add(n)`` adds to ``state.n``; with
    ``effect``, it first makes a host call that reaches outside (as ``http.get`` would), so
    its call takes the key's lock."""

    def __init__(self, effect: bool = False) -> None:
        self.calls = 0
        self.effect = effect

    def call_object(
        self, cls: str, key: str, method: str, state: Any, args: list[Any]
    ) -> tuple[list[Any], Any]:
        self.calls += 1
        if self.effect:
            effects.before_effect()
        total = int((state or {}).get("n", 0)) + int(args[0])
        return [total], {"n": total}


@pytest.fixture
def table(objects_table: Any) -> Any:
    return objects_table


def test_a_retried_object_state_write_is_the_calls_own(table: Any) -> None:
    """Measured on main: the retried save failed `lock_owner = :me` and the call raised
    "another call took it, so this call's state change was dropped" while the state held the
    change, so the caller's retry applied it twice."""
    objects = DynamoObjects(table, "objects", FakeClock())
    lost = LostAnswers(table)
    lost.lose(writes("PutItem", "lock_owner = :me"))
    counter = Counter(effect=True)
    assert objects.call(counter, "Tally", "t-1", "add", [5]) == [5]
    assert lost.lost, "the state write was not retried"
    assert objects.call(counter, "Tally", "t-1", "add", [1]) == [6]
    assert counter.calls == 2


def test_a_retried_lock_is_taken_at_once(table: Any) -> None:
    """A lock whose answer was lost is the call's own: it does not wait out its own lock."""
    objects = DynamoObjects(table, "objects", FakeClock())
    lost = LostAnswers(table)
    lost.lose(writes("UpdateItem", "SET lock_owner = :me"))
    # Waiting out its own lock would end in "busy" after OBJECT_WAIT_S: the call succeeding says
    # it did not (no wall-clock bound, which a busy machine breaks).
    assert objects.call(Counter(effect=True), "Tally", "t-2", "add", [2]) == [2]
    assert lost.lost, "the lock was not retried"


def test_a_retried_signal_numbering_leaves_no_gap(p: AwsPlatform, lost: LostAnswers) -> None:
    """Measured on main: the retried `ADD signal_seq` numbered one signal twice, leaving a
    number no signal holds (read as pending by every later load)."""
    p.start("big-step", {"n": 10}, id="sig-1")
    lost.lose(writes("UpdateItem", "ADD signal_seq"))
    assert p.signal("sig-1", "go") is True
    assert lost.lost, "the numbering was not retried"
    assert whole(run_item(p, "sig-1")["signal_seq"]) == 1
    assert [(x.id, x.name, x.state) for x in p.platform.store.signals("sig-1")] == [(1, "go", "consumed")]
    assert p.get("sig-1").status == "completed"


def test_a_retried_timer_firing_says_it_fired(p: AwsPlatform, lost: LostAnswers) -> None:
    """Measured on main: the retry failed its condition and the firing answered "not fired"
    although the timer had become a wake-up. (A timer's own wake fired it then; since stop
    54 only the reconciler fires timers, with the same write.)"""
    p.start("wait-then-raise", None, id="fire-1")
    store = p.platform.store
    due = store.timer("fire-1")
    assert due is not None
    lost.lose(writes("UpdateItem", "timer_due = :due"))
    assert store.fire_due_timers(due) == ["fire-1"]
    assert lost.lost, "the firing was not retried"
    assert store.timer("fire-1") is None and "fire-1" in store.waiting(["fire-1"])


def test_a_retried_lease_steal_takes_the_lease(p: AwsPlatform, lost: LostAnswers) -> None:
    """Measured on main: a worker taking over a dead owner's lease whose write committed and
    whose answer was lost had botocore's retry fail its own condition (the holder is no
    longer the dead owner), and answered BUSY while holding the lease: the run waited for
    that lease to lapse and the reconciler to send it on."""
    p.start("wait-then-raise", None, id="steal-1")
    store = p.platform.store
    start_ms = int(p._clock.now() * 1000)
    store.heartbeat("gone", start_ms)
    assert store.acquire_lease("steal-1", "gone", start_ms, 3_600_000) == Lease.OK
    p._clock.advance(600)  # the owner stopped beating long ago; its lease has not lapsed
    lost.lose(writes("UpdateItem", "lease_owner = :holder"))
    now_ms = int(p._clock.now() * 1000)
    assert store.acquire_lease("steal-1", "next", now_ms, 30_000) == Lease.OK
    assert lost.lost, "the steal was not retried"
    item = run_item(p, "steal-1")
    assert item["lease_owner"]["S"] == "next" and whole(item["lease_until"]) == now_ms + 30_000
    assert store.lease_token("steal-1") == whole(item["lease_token"])


def test_an_object_state_write_of_unknown_outcome_that_committed_says_so(table: Any) -> None:
    """The state write committed and every answer was lost: the call settles the outcome by
    unlocking first, finds its own save, and returns its results (once applied)."""
    objects = DynamoObjects(table, "objects", FakeClock())
    cut = CutAfterCommit(table, "PutItem", "lock_owner = :me")
    counter = Counter(effect=True)
    assert objects.call(counter, "Tally", "t-3", "add", [4]) == [4]
    assert cut.cut >= 2, "botocore did not retry the cut write"
    cut.needle = "never"
    assert objects.call(counter, "Tally", "t-3", "add", [1]) == [5]


def test_a_retried_optimistic_state_write_is_the_calls_own(table: Any) -> None:
    """A call that makes no effect writes its state with one put conditional on the version
    it read; a retry of that put whose first attempt committed finds the item saved by the
    call, and the call does not run its method again."""
    objects = DynamoObjects(table, "objects", FakeClock())
    lost = LostAnswers(table)
    lost.lose(writes("PutItem", "attribute_not_exists(version)"))
    counter = Counter()
    assert objects.call(counter, "Tally", "t-4", "add", [5]) == [5]
    assert lost.lost, "the state write was not retried"
    assert counter.calls == 1
    assert objects.call(counter, "Tally", "t-4", "add", [1]) == [6]


def test_an_optimistic_state_write_of_unknown_outcome_that_committed_says_so(table: Any) -> None:
    """The optimistic put committed and every answer was lost: the call moves the version on
    (so a put still on its way could not commit later), finds its own save instead, and
    returns its results, applied once."""
    objects = DynamoObjects(table, "objects", FakeClock())
    cut = CutAfterCommit(table, "PutItem", "attribute_not_exists(version)")
    counter = Counter()
    assert objects.call(counter, "Tally", "t-5", "add", [4]) == [4]
    assert cut.cut >= 2, "botocore did not retry the cut write"
    cut.needle = "never"
    assert objects.call(counter, "Tally", "t-5", "add", [1]) == [5]
    assert counter.calls == 2

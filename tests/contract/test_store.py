"""The store contract (runtime/store/base.py), run unchanged against every backend."""

from __future__ import annotations

import pytest

from runtime.core.clock import FakeClock
from runtime.core.journal import Entry, Kind
from runtime.errors import EngineBug, JournalConflict, SignalBacklogFull
from runtime.store.base import OWNER_DEAD_AFTER_MS, Lease, Progress, RunRecord, RunUpdate, Store, TimerSet
from tests.support.older_layout import written_by_older_code


def new_run(
    run_id: str = "r1", workflow: str = "wf", *, parent: str | None = None, at: float = 100.0
) -> RunRecord:
    return RunRecord(
        id=run_id,
        workflow=workflow,
        status="running",
        input={"x": 1},
        parent_id=parent,
        created_at=at,
        updated_at=at,
    )


def started(at: float = 100.0) -> Entry:
    return Entry(1, Kind.STARTED, "wf", {"format": 1, "input": {"x": 1}}, at)


def entry(seq: int, kind: str = Kind.VALUE, name: str | None = "os.time", data: dict | None = None) -> Entry:
    return Entry(seq, kind, name, data if data is not None else {"value": seq}, 100.0 + seq)


def test_create_run_writes_the_run_its_first_entry_and_a_wakeup(store: Store) -> None:
    run, created = store.create_run(new_run(), started())
    assert created and run.journal_len == 1
    assert store.get_run("r1") == run
    assert [e.kind for e in store.journal("r1")] == [Kind.STARTED]
    assert [w[0] for w in store.wakeups()] == ["r1"]


def test_create_run_with_an_existing_id_returns_the_existing_run_and_writes_nothing(store: Store) -> None:
    store.create_run(new_run(), started())
    again, created = store.create_run(new_run(workflow="other"), started())
    assert not created and again.workflow == "wf"
    assert len(store.journal("r1")) == 1


def test_get_run_of_a_missing_id_is_none(store: Store) -> None:
    assert store.get_run("nope") is None


def test_append_numbers_entries_after_the_expected_length(store: Store) -> None:
    store.create_run(new_run(), started())
    store.append("r1", 1, [entry(2), entry(3)], update=RunUpdate("sleeping", "sleep"))
    run = store.get_run("r1")
    assert (
        run is not None and run.journal_len == 3 and run.status == "sleeping" and run.current_step == "sleep"
    )
    assert [e.seq for e in store.journal("r1")] == [1, 2, 3]


def test_append_round_trips_entry_data(store: Store) -> None:
    store.create_run(new_run(), started())
    data = {"n": 2, "values": [1, 2.5, "é", None, {"a": [True, False]}]}
    store.append("r1", 1, [Entry(2, Kind.STEP_RESULT, "s", data, 123.25)])
    assert store.journal("r1")[1] == Entry(2, Kind.STEP_RESULT, "s", data, 123.25)


def test_only_one_writer_wins_a_journal_slot(store: Store) -> None:
    store.create_run(new_run(), started())
    store.append("r1", 1, [entry(2)])
    with pytest.raises(JournalConflict):
        store.append("r1", 1, [entry(2, data={"value": "loser"})])
    assert store.journal("r1")[1].data == {"value": 2}
    assert store.get_run("r1").journal_len == 2  # type: ignore[union-attr]


def test_an_update_without_entries_is_still_conditional_on_the_length(store: Store) -> None:
    store.create_run(new_run(), started())
    store.append("r1", 1, [entry(2)])
    with pytest.raises(JournalConflict):
        store.append("r1", 1, [], update=RunUpdate("failed", None, error="x"))
    assert store.get_run("r1").status == "running"  # type: ignore[union-attr]


def test_ending_a_run_sets_its_pending_signals_aside_and_clears_its_timer(store: Store) -> None:
    store.create_run(new_run(), started())
    store.append("r1", 1, [], update=RunUpdate("awaiting", "await 'x'"), timer=TimerSet(5_000))
    store.add_signal("r1", "x", {"p": 1}, 101.0)
    store.append(
        "r1",
        1,
        [Entry(2, Kind.COMPLETED, None, {"result": 1}, 102.0)],
        update=RunUpdate("completed", None, result=1),
    )
    assert [s.state for s in store.signals("r1")] == ["set_aside"]
    assert store.pending_signals("r1") == []
    assert store.timer("r1") is None and store.get_run("r1").result == 1  # type: ignore[union-attr]


def test_a_wait_done_entry_consumes_its_signal(store: Store) -> None:
    store.create_run(new_run(), started())
    sid, live = store.add_signal("r1", "paid", {"by": "ada"}, 101.0)
    assert live
    done = Entry(
        2,
        Kind.WAIT_DONE,
        "await",
        {"by": "signal", "signal": "paid", "payload": {"by": "ada"}, "signal_id": sid},
        102.0,
    )
    store.append("r1", 1, [done])
    [record] = store.signals("r1")
    assert (record.state, record.consumed_seq) == ("consumed", 2)
    assert store.pending_signals("r1") == []


def test_signals_come_back_in_arrival_order_with_their_payloads(store: Store) -> None:
    store.create_run(new_run(), started())
    ids = [store.add_signal("r1", name, {"n": i}, 100.0 + i)[0] for i, name in enumerate(["b", "a", "b"])]
    assert ids == sorted(ids) and len(set(ids)) == 3
    pending = store.pending_signals("r1")
    assert [(s.name, s.payload) for s in pending] == [("b", {"n": 0}), ("a", {"n": 1}), ("b", {"n": 2})]


def test_a_signal_to_an_ended_run_is_set_aside_and_reported_not_live(store: Store) -> None:
    store.create_run(new_run(), started())
    store.append("r1", 1, [Entry(2, Kind.CANCELLED, None, {}, 101.0)], update=RunUpdate("cancelled", None))
    _, live = store.add_signal("r1", "paid", None, 102.0)
    assert not live
    assert [s.state for s in store.signals("r1")] == ["set_aside"]


def test_a_signal_wakes_a_live_run(store: Store) -> None:
    store.create_run(new_run(), started())
    [(run_id, token)] = store.wakeups()
    store.clear_wakeup(run_id, token)
    assert store.wakeups() == []
    store.add_signal("r1", "x", None, 101.0)
    assert [w[0] for w in store.wakeups()] == ["r1"]


def test_clearing_an_old_wakeup_token_keeps_a_newer_wake(store: Store) -> None:
    store.create_run(new_run(), started())
    [(_, token)] = store.wakeups()
    store.add_wakeup("r1")
    store.clear_wakeup("r1", token)
    assert [w[0] for w in store.wakeups()] == ["r1"]


def test_a_wake_after_a_cleared_one_never_reuses_its_token(store: Store) -> None:
    """A worker that read a wake-up and cleared it late (after the run's next wake had
    arrived) must not clear the newer one: tokens never repeat, even once a wake-up's row
    is gone. Reusing them lost a sleeping run's timer in the two-server race test."""
    store.create_run(new_run(), started())
    [(_, first)] = store.wakeups()
    store.clear_wakeup("r1", first)
    assert store.wakeups() == []
    store.add_wakeup("r1")  # the run's timer fires while the worker still holds `first`
    store.clear_wakeup("r1", first)  # that worker, late
    [(run_id, second)] = store.wakeups()
    assert run_id == "r1" and second != first


def test_due_timers_fire_once_into_wakeups_earliest_first(store: Store) -> None:
    for rid, due in (("a", 3_000), ("b", 1_000), ("c", 9_000)):
        store.create_run(new_run(rid), started())
        [(_, token)] = [w for w in store.wakeups() if w[0] == rid]
        store.clear_wakeup(rid, token)
        store.append(rid, 1, [], update=RunUpdate("sleeping", "sleep"), timer=TimerSet(due))
    assert store.next_due() == 1_000
    assert store.fire_due_timers(5_000) == ["b", "a"]
    assert store.fire_due_timers(5_000) == []
    assert sorted(w[0] for w in store.wakeups()) == ["a", "b"]
    assert store.next_due() == 9_000 and store.timer("c") == 9_000


def test_runs_list_newest_first_and_filter_by_status_and_workflow(store: Store) -> None:
    store.create_run(new_run("old", "wf", at=1.0), started(1.0))
    store.create_run(new_run("mid", "other", at=2.0), started(2.0))
    store.create_run(new_run("new", "wf", at=3.0), started(3.0))
    store.append("mid", 1, [], update=RunUpdate("failed", None, error="boom"))
    assert [r.id for r in store.list_runs()] == ["new", "mid", "old"]
    assert [r.id for r in store.list_runs(workflow="wf")] == ["new", "old"]
    assert [r.id for r in store.list_runs(status="failed")] == ["mid"]
    assert [r.id for r in store.list_runs(status="running", workflow="wf")] == ["new", "old"]
    assert [r.id for r in store.list_runs(limit=1)] == ["new"]


def test_children_are_found_by_parent(store: Store) -> None:
    store.create_run(new_run("p"), started())
    store.create_run(new_run("c1", parent="p", at=101.0), started())
    store.create_run(new_run("c2", parent="p", at=102.0), started())
    assert store.children("p") == ["c1", "c2"]
    assert store.children("c1") == []


def test_running_runs_are_those_left_running(store: Store) -> None:
    store.create_run(new_run("a"), started())
    store.create_run(new_run("b"), started())
    store.append("b", 1, [], update=RunUpdate("awaiting", "await 'x'"))
    assert store.running_runs() == ["a"]


def test_secrets_have_versions_and_runs_pin_the_first_they_resolve(store: Store) -> None:
    assert store.secret("k") is None
    assert store.add_secret("k", "v1") == 1
    assert store.add_secret("k", "v2") == 2
    assert store.secret("k") == (2, "v2") and store.secret("k", 1) == (1, "v1")
    assert store.pinned_secret("r1", "k") is None
    assert store.pin_secret("r1", "k", 1) == 1
    assert store.pin_secret("r1", "k", 2) == 1
    assert store.pinned_secret("r1", "k") == 1


def test_load_reads_the_run_its_pending_signals_and_optionally_its_journal(store: Store) -> None:
    store.create_run(new_run(), started())
    store.append("r1", 1, [entry(2)], update=RunUpdate("awaiting", "await 'x'"))
    sid, _ = store.add_signal("r1", "x", {"n": 1}, 101.0)
    full = store.load("r1")
    assert full is not None and full.run.journal_len == 2 and full.run.status == "awaiting"
    assert [(s.id, s.name, s.payload) for s in full.signals] == [(sid, "x", {"n": 1})]
    assert full.journal == store.journal("r1")
    light = store.load("r1", after=2)
    assert light is not None and light.journal == [] and light.signals == full.signals
    assert light.run.journal_len == 2
    newer = store.load("r1", after=1)
    assert newer is not None and [e.seq for e in newer.journal] == [2]
    assert store.load("missing") is None


def intent(seq: int, name: str = "charge") -> Entry:
    return Entry(
        seq, Kind.STEP_INTENT, name, {"pass": 1, "attempt": 1, "step_id": f"r1/{name}/1/1"}, 100.0 + seq
    )


def test_a_running_runs_current_step_is_its_last_intent_when_steps_are_progress(store: Store) -> None:
    store.create_run(new_run(), started())
    store.append("r1", 1, [intent(2, "notify")], update=RunUpdate("running", "step 'notify'"))
    store.append(
        "r1",
        2,
        [Entry(3, Kind.STEP_RESULT, "notify", {"n": 0, "values": []}, 103.0), intent(4)],
        update=RunUpdate("running", "step 'charge'", progress_only=True),
    )
    run = store.get_run("r1")
    assert run is not None and run.status == "running" and run.current_step == "step 'charge'"
    assert run.journal_len == 4
    snap = store.load("r1")
    assert snap is not None and snap.run.current_step == "step 'charge'" and snap.run.journal_len == 4


def test_a_progress_only_append_is_still_conditional_on_the_length(store: Store) -> None:
    store.create_run(new_run(), started())
    store.append("r1", 1, [intent(2)], update=RunUpdate("running", "step 'charge'", progress_only=True))
    with pytest.raises(JournalConflict):
        store.append("r1", 1, [intent(2, "other")], update=RunUpdate("running", "x", progress_only=True))
    assert [e.name for e in store.journal("r1")] == ["wf", "charge"]


def test_a_multi_entry_append_lands_whole_or_not_at_all(store: Store) -> None:
    store.create_run(new_run(), started())
    store.append("r1", 1, [entry(2)])
    with pytest.raises(JournalConflict):  # entry 3 is free but entry 2 is taken
        store.append("r1", 1, [entry(2, data={"value": "x"}), entry(3)])
    assert [e.seq for e in store.journal("r1")] == [1, 2]
    store.append("r1", 2, [entry(3), entry(4), entry(5)])
    assert [e.seq for e in store.journal("r1")] == [1, 2, 3, 4, 5]


def test_an_append_that_skips_a_position_is_an_engine_bug_and_writes_nothing(store: Store) -> None:
    store.create_run(new_run(), started())
    with pytest.raises(EngineBug, match="entry 3 of run 'r1' is out of order"):
        store.append("r1", 1, [entry(3)])
    assert [e.seq for e in store.journal("r1")] == [1]


# --- wake-ups the reconciler looks for -----------------------------------------------------


def test_a_wakeup_is_as_old_as_its_first_ask_until_it_is_cleared(store: Store, clock: FakeClock) -> None:
    store.create_run(new_run("a", at=1_000.0), started(at=1_000.0))  # asked at 1000
    clock.advance(30)
    store.add_wakeup("a")  # asked again: still waiting since 1000
    store.create_run(new_run("b", at=1_030.0), started(at=1_030.0))
    assert store.wakeups_older_than(1_020.0) == ["a"]
    assert sorted(store.wakeups_older_than(1_031.0)) == ["a", "b"]
    for run_id, token in store.wakeups():
        store.clear_wakeup(run_id, token)
    assert store.wakeups_older_than(2_000.0) == []


def test_an_append_that_wakes_the_run_records_its_wake_up_in_the_same_write(store: Store) -> None:
    store.create_run(new_run("w"), started())
    for run_id, token in store.wakeups():
        store.clear_wakeup(run_id, token)
    store.append("w", 1, [entry(2)], update=RunUpdate("failed", "x", error="boom"))
    assert store.wakeups() == []
    store.append("w", 2, [entry(3, Kind.RESUMED, None)], update=RunUpdate("running", "x", woken=True))
    assert [run_id for run_id, _ in store.wakeups()] == ["w"]
    assert store.get_run("w").status == "running"  # type: ignore[union-attr]


def test_a_wakeup_for_a_missing_run_is_ignored(store: Store) -> None:
    store.add_wakeup("nobody")
    assert store.wakeups() == []


def test_stale_running_runs_are_running_unchanged_and_unleased(store: Store) -> None:
    # On DynamoDB the list covers items older code wrote (by their status, STATUS#running):
    # a run the current code writes is listed with every in-flight run, and its wake-up is
    # its backstop (tests/aws/test_status_index.py).
    with written_by_older_code():
        for run_id in ("old", "leased", "parked"):
            store.create_run(new_run(run_id), started(at=100.0))
        store.create_run(new_run("recent", at=150.0), started(at=150.0))
        store.append("parked", 1, [], update=RunUpdate("sleeping", "sleep"))
    # Left running with no wake-up, the case the list is for (older code dropped a run's
    # wake-up when a worker took it; a run with its wake-up is the reconciler's).
    for run_id, token in store.wakeups():
        store.clear_wakeup(run_id, token)
    now = 200_000
    assert store.acquire_lease("leased", "w", now, 60_000) == Lease.OK
    assert store.stale_running(101.0, now) == ["old"]
    # Once the lease has expired the leased run is stale too.
    assert sorted(store.stale_running(101.0, now + 60_001)) == ["leased", "old"]


# --- leases --------------------------------------------------------------------------------


def test_a_lease_is_one_owners_until_released_or_expired(store: Store) -> None:
    store.create_run(new_run(), started())
    t = 1_000_000
    assert store.acquire_lease("r1", "a", t, 1_000) == Lease.OK
    assert store.acquire_lease("r1", "b", t + 1_000, 1_000) == Lease.BUSY  # not yet past its end
    assert store.acquire_lease("r1", "a", t + 500, 1_000) == Lease.OK  # its owner may take it again
    assert store.acquire_lease("r1", "b", t + 1_501, 1_000) == Lease.OK  # expired
    store.release_lease("r1", "a")  # not a's any more: nothing happens
    assert store.acquire_lease("r1", "a", t + 1_600, 1_000) == Lease.BUSY
    store.release_lease("r1", "b")
    assert store.acquire_lease("r1", "a", t + 1_600, 1_000) == Lease.OK


def test_the_lease_of_a_missing_run_is_missing(store: Store) -> None:
    assert store.acquire_lease("nobody", "a", 1_000, 1_000) == Lease.MISSING


def test_an_owner_that_stopped_beating_loses_its_leases(store: Store) -> None:
    store.create_run(new_run("beating"), started())
    store.create_run(new_run("stopped"), started())
    store.create_run(new_run("never"), started())
    t = 1_000_000
    store.heartbeat("alive", t)
    store.heartbeat("dead", t)
    assert store.acquire_lease("beating", "alive", t, 3_600_000) == Lease.OK
    assert store.acquire_lease("stopped", "dead", t, 3_600_000) == Lease.OK
    assert store.acquire_lease("never", "silent", t, 3_600_000) == Lease.OK
    later = t + OWNER_DEAD_AFTER_MS + 1
    store.heartbeat("alive", later)
    assert store.acquire_lease("beating", "other", later, 1_000) == Lease.BUSY
    assert store.acquire_lease("stopped", "other", later, 1_000) == Lease.OK
    # An owner that never beat keeps its lease until the lease itself ends.
    assert store.acquire_lease("never", "other", later, 1_000) == Lease.BUSY


def test_parking_or_ending_a_run_releases_its_lease(store: Store) -> None:
    store.create_run(new_run("p"), started())
    store.create_run(new_run("e"), started())
    assert store.acquire_lease("p", "w", 1_000, 60_000) == Lease.OK
    assert store.acquire_lease("e", "w", 1_000, 60_000) == Lease.OK
    store.append("p", 1, [entry(2)], update=RunUpdate("sleeping", "sleep"), timer=TimerSet(9_000))
    store.append("e", 1, [entry(2, Kind.COMPLETED, None, {"result": 1})], update=RunUpdate("completed"))
    assert store.acquire_lease("p", "other", 1_001, 60_000) == Lease.OK
    assert store.acquire_lease("e", "other", 1_001, 60_000) == Lease.OK


def test_progress_while_running_keeps_the_lease(store: Store) -> None:
    store.create_run(new_run(), started())
    assert store.acquire_lease("r1", "w", 1_000, 60_000) == Lease.OK
    store.append("r1", 1, [entry(2)], update=RunUpdate("running", "step 'a'", progress_only=True))
    assert store.acquire_lease("r1", "other", 1_001, 60_000) == Lease.BUSY


def test_a_signal_past_the_backlog_bound_is_refused_by_the_write(store: Store) -> None:
    """Issue 14 point 9: with max_backlog the store counts the unconsumed signals as part of
    the write (a condition on DynamoDB, inside BEGIN IMMEDIATE on SQLite), refuses the one
    over the bound and records nothing for it; a consumed signal makes room again."""
    store.create_run(new_run(), started())
    sids = [store.add_signal("r1", "x", {"n": i}, 101.0, max_backlog=3)[0] for i in range(3)]
    with pytest.raises(SignalBacklogFull) as e:
        store.add_signal("r1", "x", {"n": 3}, 101.0, max_backlog=3)
    assert str(e.value).startswith("run 'r1' already has 3 unconsumed signals")
    assert len(store.signals("r1")) == 3
    done = Entry(
        2,
        Kind.WAIT_DONE,
        "await",
        {"by": "signal", "signal": "x", "payload": {"n": 0}, "signal_id": sids[0]},
        102.0,
    )
    store.append("r1", 1, [done])
    store.add_signal("r1", "x", {"n": 4}, 103.0, max_backlog=3)
    assert len(store.pending_signals("r1")) == 3
    with pytest.raises(SignalBacklogFull):
        store.add_signal("r1", "x", {"n": 5}, 104.0, max_backlog=3)


def test_the_backlog_bound_does_not_refuse_signals_to_an_ended_run(store: Store) -> None:
    store.create_run(new_run(), started())
    for i in range(2):
        store.add_signal("r1", "x", i, 101.0, max_backlog=2)
    store.append("r1", 1, [Entry(2, Kind.CANCELLED, None, {}, 102.0)], update=RunUpdate("cancelled", None))
    _, live = store.add_signal("r1", "x", 3, 103.0, max_backlog=2)
    assert not live and [s.state for s in store.signals("r1")] == ["set_aside"] * 3


# --- lists over many runs (issue 16.1: DynamoDB spreads them over index shards) ---------------


def test_lists_over_many_runs_keep_their_order_and_limits(store: Store, clock: FakeClock) -> None:
    """Forty runs land in most of the sixteen index shards on DynamoDB; every list still
    comes back in one order: newest first, the limit the newest, timers earliest first,
    wake-ups oldest first."""
    ids = [f"run-{i:02d}" for i in range(40)]
    for i, rid in enumerate(ids):
        clock.advance(1)
        store.create_run(new_run(rid, "wf" if i % 2 else "other", at=1_000.0 + i), started(1_000.0 + i))
    newest = list(reversed(ids))
    assert [r.id for r in store.list_runs()] == newest
    assert [r.id for r in store.list_runs(limit=7)] == newest[:7]
    assert [r.id for r in store.list_runs(workflow="wf")] == [r for r in newest if int(r[-2:]) % 2]
    assert [r.id for r in store.list_runs(workflow="wf", limit=3)] == [r for r in newest if int(r[-2:]) % 2][
        :3
    ]
    assert store.wakeups_older_than(1_011.5) == ids[:12]  # asked at 1000 + i
    assert [w[0] for w in store.wakeups()] == ids
    # Half of them sleep, due in reverse order of creation; the rest stay running.
    for i, rid in enumerate(ids):
        [(_, token)] = [w for w in store.wakeups() if w[0] == rid]
        store.clear_wakeup(rid, token)
        if i % 2 == 0:
            store.append(rid, 1, [], update=RunUpdate("sleeping", "sleep"), timer=TimerSet(100_000 - i))
    sleeping = [rid for i, rid in enumerate(ids) if i % 2 == 0]
    running = [rid for i, rid in enumerate(ids) if i % 2]
    assert [r.id for r in store.list_runs(status="sleeping")] == list(reversed(sleeping))
    assert [r.id for r in store.list_runs(status="running", limit=4)] == list(reversed(running))[:4]
    assert store.running_runs() == running  # oldest first
    assert store.next_due() == 100_000 - 38
    assert store.fire_due_timers(100_000 - 30) == ["run-38", "run-36", "run-34", "run-32", "run-30"]
    assert store.next_due() == 100_000 - 28


# --- cancel intents: a cascade that a crash cut short is found again (issue 24.2) ---------


def test_a_cancel_intent_is_kept_until_it_is_ended(store: Store) -> None:
    store.create_run(new_run("p"), started())
    assert store.pending_cancels() == []
    store.begin_cancel("p", 500.0)
    store.begin_cancel("p", 700.0)  # a second cancel of the same run: one intent
    store.begin_cancel("q", 600.0)  # an intent names a run id; the run need not exist
    assert sorted(store.pending_cancels()) == ["p", "q"]
    assert store.pending_cancels(before=550.0) == ["p"]  # the first intent's time is kept
    store.end_cancel("p")
    store.end_cancel("p")  # ending a finished intent is a no-op
    assert store.pending_cancels() == ["q"]


def test_children_of_a_wide_parent_all_come_back(store: Store) -> None:
    store.create_run(new_run("p"), started())
    kids = [f"k{i:04d}" for i in range(150)]
    for i, kid in enumerate(kids):
        store.create_run(new_run(kid, parent="p", at=100.0 + i), started(100.0 + i))
    assert sorted(store.children("p")) == kids


# --- a child's end wakes its parent in the same write (issue 27.1) ----------------------


def _parent_and_child(store: Store) -> None:
    store.create_run(new_run("par"), started())
    store.create_run(new_run("kid", parent="par"), started())
    for run_id, token in store.wakeups():
        store.clear_wakeup(run_id, token)
    store.append("par", 1, [], update=RunUpdate("awaiting", "child 'kid'"))


@pytest.mark.parametrize("with_entries", [True, False])
def test_an_end_with_wake_records_the_other_runs_wakeup_in_the_same_write(
    store: Store, with_entries: bool
) -> None:
    _parent_and_child(store)
    entries = [Entry(2, Kind.COMPLETED, None, {"result": 1}, 102.0)] if with_entries else []
    store.append(
        "kid", 1, entries, update=RunUpdate("completed" if with_entries else "failed", None, wake="par")
    )
    assert [w[0] for w in store.wakeups()] == ["par"]
    assert store.get_run("kid").status == ("completed" if with_entries else "failed")  # type: ignore[union-attr]


def test_an_end_with_wake_that_loses_its_slot_wakes_no_one(store: Store) -> None:
    _parent_and_child(store)
    store.append("kid", 1, [entry(2)])
    with pytest.raises(JournalConflict):
        store.append("kid", 1, [], update=RunUpdate("failed", None, error="x", wake="par"))
    assert store.wakeups() == []
    assert store.get_run("kid").status == "running"  # type: ignore[union-attr]


def test_progress_names_a_waiting_wakeup_with_its_first_ask_and_a_live_lease(
    store: Store, clock: FakeClock
) -> None:
    """Issue 29.4: what "why is this run not moving?" reads beyond the journal."""
    assert store.progress("nobody") == Progress()
    run, _ = store.create_run(new_run(), started())
    first = store.progress(run.id)
    # A start asks for a worker when the run is created.
    assert first.wakeup_at == run.created_at and first.lease_owner is None
    clock.advance(5)
    store.add_wakeup(run.id)  # a second ask keeps the first one's time: it waits since then
    assert store.progress(run.id).wakeup_at == run.created_at
    [(_, token)] = store.wakeups()
    store.clear_wakeup(run.id, token)
    assert store.progress(run.id).wakeup_at is None
    store.add_wakeup(run.id)  # asked again later: it waits since then
    assert store.progress(run.id).wakeup_at == clock.now()
    now_ms = int(clock.now() * 1000)
    assert store.acquire_lease(run.id, "w1", now_ms, 30_000) == Lease.OK
    held = store.progress(run.id)
    assert (held.lease_owner, held.lease_until_ms) == ("w1", now_ms + 30_000)
    store.release_lease(run.id, "w1")
    assert store.progress(run.id).lease_owner is None


def test_dropping_entries_keeps_entry_one_and_whole_appends_from_the_cut(store: Store) -> None:
    """Issue 27's generations kept: the entries of older generations (seq 2 up to a cut) go;
    entry 1 stays, and so does everything from the cut, which starts an append of its own."""
    store.create_run(new_run(), started())
    store.append("r1", 1, [Entry(2, "step.intent", "a", {}, 101.0), Entry(3, "step.result", "a", {}, 101.0)])
    store.append("r1", 3, [Entry(4, "run.continued", None, {"generation": 2}, 102.0)])
    store.append("r1", 4, [Entry(5, "step.intent", "b", {}, 103.0)])
    store.drop_entries("r1", 4)
    assert [e.seq for e in store.journal("r1")] == [1, 4, 5]
    store.drop_entries("r1", 4)  # again: nothing more goes
    assert [e.seq for e in store.journal("r1")] == [1, 4, 5]
    store.append("r1", 5, [Entry(6, "step.result", "b", {}, 104.0)])  # appends go on by seq
    assert [e.seq for e in store.journal("r1")] == [1, 4, 5, 6]

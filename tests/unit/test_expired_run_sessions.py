"""A worker keeps a parked run's coroutine (its session) between activations. A run deleted
at its expiry and started again under its id is another run: a worker still holding the
first one's session must not serve the second with it (it would replay the old run's input
and journal). Two platforms on one SQLite store, as ``lunaflow dev``'s run workers are."""

from __future__ import annotations

from pathlib import Path

from runtime.core.clock import FakeClock
from runtime.core.journal import Status
from runtime.platform.platform import Platform
from runtime.store.sqlite import SQLiteStore

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "retention"
DAY = 86_400.0


def test_a_worker_holding_the_deleted_runs_session_serves_the_new_run_of_its_id_from_its_own_journal(
    tmp_path: Path,
) -> None:
    clock = FakeClock(1_000.0)
    store = SQLiteStore(tmp_path / "store.sqlite", clock=clock)
    a, b = Platform(PROJECT, store, clock), Platform(PROJECT, store, clock)
    try:
        a.start("echo-after", "old", id="R")
        a.run_until_idle()  # a parks R and keeps its session
        b.signal("R", "go", 1)
        b.run_until_idle()  # b ends R: a's session is now stale
        assert store.get_run("R").result == {"input": "old", "got": 1}  # type: ignore[union-attr]
        clock.advance(2 * DAY + 1)
        assert b.expire_runs() == ["R"]
        b.start("echo-after", "new", id="R")
        b.run_until_idle()  # the new R parks at the journal length the old one had
        a.signal("R", "go", 2)
        a.run_until_idle()  # a serves it
        run = store.get_run("R")
        assert run is not None and run.status == Status.COMPLETED
        assert run.result == {"input": "new", "got": 2}
    finally:
        store.close()


def test_the_code_pin_of_a_deleted_run_goes_with_it_and_one_a_crash_left_goes_at_the_next_sweep(
    tmp_path: Path,
) -> None:
    """A run of the id started later runs on the current code, not on the code a deleted run
    of the id was pinned to."""
    from runtime.platform.versions import PinFile, SnapshotFolder

    clock = FakeClock(1_000.0)
    store = SQLiteStore(tmp_path / "store.sqlite", clock=clock)
    p = Platform(PROJECT, store, clock)
    pins = PinFile(tmp_path)
    p.keep_versions(pins, SnapshotFolder(tmp_path))
    try:
        p.start("echo-after", "x", id="R")
        p.signal("R", "go", 1)
        p.run_until_idle()
        pins.set({"R": "0123456789abcdef", "crashed": "0123456789abcdef"})  # "crashed": no run
        clock.advance(2 * DAY + 1)
        assert p.expire_runs() == ["R"]
        assert pins.all() == {}
    finally:
        store.close()

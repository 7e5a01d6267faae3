"""Which runs another process started ``lunaflow dev`` prints (``runtime.dev.server._Starts``),
read from a real store: each once, including a run whose start time is earlier than one
already printed (its process read the clock before another's write committed), and none of
those there before the server started."""

from __future__ import annotations

from pathlib import Path

from runtime.core.journal import Entry, Kind, Status
from runtime.dev.server import STARTS_LOOKBACK_S, STARTS_PAGE, _Starts
from runtime.store.base import RunRecord
from runtime.store.sqlite import STORE_FILE, SQLiteStore


def _start(store: SQLiteStore, run_id: str, at: float) -> None:
    run = RunRecord(id=run_id, workflow="wf", status=Status.RUNNING, input=None, created_at=at, updated_at=at)
    store.create_run(run, Entry(1, Kind.STARTED, "wf", {"format": 1, "input": None}, at))


def test_each_start_by_another_process_is_printed_once_even_one_with_an_earlier_clock(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / STORE_FILE)
    try:
        _start(store, "before", 1000.0)
        starts = _Starts(store)
        assert starts.new() == [], "a run there at the server's start is no new start"
        _start(store, "b", 1002.0)
        assert starts.new() == [("b", "wf")]
        # Started a moment before b by its clock, committed after b was printed.
        _start(store, "a", 1001.5)
        assert starts.new() == [("a", "wf")]
        assert starts.new() == []
        _start(store, "c", 1003.0)
        assert starts.new() == [("c", "wf")]
    finally:
        store.close()


def test_more_starts_than_a_page_within_the_look_back_are_each_printed_once(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / STORE_FILE)
    try:
        starts = _Starts(store)
        n = STARTS_PAGE + 50
        for i in range(n):
            _start(store, f"r{i:05d}", 2000.0 + i * (STARTS_LOOKBACK_S / (2 * n)))
        printed = [rid for rid, _ in starts.new()]
        assert printed == [f"r{i:05d}" for i in range(n)]
        _start(store, "late", 2000.0)
        assert starts.new() == [("late", "wf")]
    finally:
        store.close()

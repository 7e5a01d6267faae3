"""The local torture's verdict accepts a run failed by the rule for interrupted attempts when
each of the attempt's three starts was journaled by a dev server the driver SIGKILLed before
the attempt's next entry, as the AWS torture's does.

The torture kills a quarter of its servers within 0.6 s of their start, when recovery runs
the steps it found begun; on a loaded machine one step was caught so three times in a row
(`chain-0195: failed (step 'add' failed after 1 attempts: step 'add' attempt 1 was
interrupted 3 times: the process running it ended)`), which the platform promises, and the
verdict failed. Here the store (a real SQLite store) and the ledger are written as the
torture writes them, and the checker is asked.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.torture import generation_at  # noqa: E402
from bench.torture_check import LEDGER_SCHEMA, Report, accept_killed_attempts  # noqa: E402
from runtime.core.journal import Entry, Kind, Status  # noqa: E402
from runtime.store.base import RunRecord, RunUpdate  # noqa: E402
from runtime.store.sqlite import STORE_FILE, SQLiteStore  # noqa: E402

INTERRUPTED = "step 'add' attempt 1 was interrupted 3 times: the process running it ended"


def _failed_by_three_starts(tmp_path: Path, third_killed: bool) -> tuple[Report, tuple[int, int, int]]:
    """A ``chain`` run whose step ``add`` was started at 10, 20 and 30 s and recorded as
    failed at 40 s; generations 1-3 ran from 0 to 15, 15 to 25 and 25 to 35 s, each killed
    (or, with ``third_killed`` False, the third stopped by the driver's SIGTERM at its end)."""
    data = tmp_path / "data"
    data.mkdir()
    store = SQLiteStore(data / STORE_FILE)
    record = RunRecord("chain-1", "chain", Status.RUNNING, {}, created_at=1.0, updated_at=1.0)
    store.create_run(record, Entry(1, Kind.STARTED, "chain", {"format": 1, "input": {}}, 1.0))
    step = {"pass": 1, "attempt": 1, "step_id": "chain-1/add/1/1"}
    entries = [
        Entry(2, Kind.STEP_INTENT, "add", step, 10.0),
        Entry(3, Kind.STEP_RERUN, "add", {"attempt": 1, "start": 2}, 20.0),
        Entry(4, Kind.STEP_RERUN, "add", {"attempt": 1, "start": 3}, 30.0),
        Entry(5, Kind.STEP_FAILED, "add", {"attempt": 1, "error": INTERRUPTED, "final": True}, 40.0),
    ]
    for i, entry in enumerate(entries):
        ends = entry.kind == Kind.STEP_FAILED
        update = RunUpdate(Status.FAILED, "add", error=INTERRUPTED) if ends else None
        store.append("chain-1", 1 + i, [entry], update=update)
    store.close()
    ledger = tmp_path / "ledger.sqlite"
    db = sqlite3.connect(ledger)
    db.executescript(LEDGER_SCHEMA)
    db.execute("INSERT INTO plans VALUES (?,?,?)", ("chain-1", "chain", "{}"))
    db.executemany(
        "INSERT INTO gens VALUES (?,?,?,?)",
        [
            (1, 0.0, 15.0, "sigkill"),
            (2, 15.0, 25.0, "sigkill"),
            (3, 25.0, 35.0, "sigkill" if third_killed else "sigterm"),
            (4, 35.0, None, None),
        ],
    )
    db.commit()
    db.close()
    report = Report(runs_planned=1, runs_not_as_expected=1, audit_installed=True)
    error = f"step 'add' failed after 1 attempts: {INTERRUPTED}"
    report.examples["runs_not_as_expected"] = [f"chain-1: failed ({error})"]
    return report, accept_killed_attempts(report, data / STORE_FILE, ledger, generation_at(ledger))


def test_a_run_failed_by_three_killed_starts_is_accepted(tmp_path: Path) -> None:
    report, counts = _failed_by_three_starts(tmp_path, third_killed=True)
    assert counts == (1, 0, 0)
    assert report.runs_not_as_expected == 0 and report.examples["runs_not_as_expected"] == []
    assert report.ok


def test_a_start_whose_server_was_not_killed_keeps_the_run_a_bad_count(tmp_path: Path) -> None:
    report, counts = _failed_by_three_starts(tmp_path, third_killed=False)
    assert counts == (0, 0, 0)
    assert report.runs_not_as_expected == 1 and not report.ok


def test_an_entry_is_written_by_the_generation_alive_at_its_time(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    db = sqlite3.connect(ledger)
    db.executescript(LEDGER_SCHEMA)
    db.executemany("INSERT INTO gens VALUES (?,?,?,?)", [(1, 0.0, 15.0, "sigkill"), (2, 15.0, None, None)])
    db.commit()
    db.close()
    writer = generation_at(ledger)
    assert [writer("r", 1, at) for at in (-1.0, 0.0, 14.9, 15.0, 1e9)] == [None, 1, 1, 2, 2]

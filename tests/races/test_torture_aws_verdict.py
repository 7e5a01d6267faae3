"""Issue 24 §8: the AWS torture's verdict accepts the consequences of an accepted failure.

A child whose attempt was started three times by workers that were each SIGKILLed fails by
the rule for interrupted attempts, which the checker accepts (``interrupted_by_kills``);
its parent then awaits the signal the child would have sent, forever. On a loaded machine
that happened (`parent-0012: awaiting (no error)`) and failed the run. Here the exported
store (a real SQLite store), the ledger and the chunk audit logs are written as the
torture writes them, and the checker is asked.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.torture_aws import interrupted_by_kills  # noqa: E402
from bench.torture_check import LEDGER_SCHEMA, Report  # noqa: E402
from runtime.core.journal import Entry, Kind, Status  # noqa: E402
from runtime.store.base import RunRecord, RunUpdate  # noqa: E402
from runtime.store.sqlite import STORE_FILE, SQLiteStore  # noqa: E402

INTERRUPTED = "step 'work' (attempt 1) was interrupted 3 times: the process running it ended"


def _run(store: SQLiteStore, run_id: str, workflow: str, parent: str | None) -> None:
    record = RunRecord(run_id, workflow, Status.RUNNING, {}, parent_id=parent, created_at=1.0, updated_at=1.0)
    store.create_run(
        record, Entry(1, Kind.STARTED, workflow, {"format": 1, "workflow": workflow, "input": {}}, 1.0)
    )


def test_a_parent_awaiting_a_child_failed_by_three_kills_is_accepted(tmp_path: Path) -> None:
    data, logs = tmp_path / "exported", tmp_path / "logs"
    data.mkdir()
    logs.mkdir()
    store = SQLiteStore(data / STORE_FILE)
    _run(store, "parent-1", "parent", None)
    store.append(
        "parent-1",
        1,
        [Entry(2, Kind.WAIT, "await", {"names": ["child_done"], "timeout_ms": 3_600_000}, 2.0)],
        update=RunUpdate(Status.AWAITING, "await child_done"),
    )
    _run(store, "parent-1-c", "child", "parent-1")
    step = {"pass": 1, "attempt": 1, "step_id": "work/1/1"}
    entries = [
        Entry(2, Kind.STEP_INTENT, "work", step, 10.0),
        Entry(3, Kind.STEP_RERUN, "work", {**step, "start": 2}, 20.0),
        Entry(4, Kind.STEP_RERUN, "work", {**step, "start": 3}, 30.0),
        Entry(5, Kind.STEP_FAILED, "work", {"attempt": 1, "error": INTERRUPTED, "final": True}, 40.0),
    ]
    for i, entry in enumerate(entries):
        done = entry.kind == Kind.STEP_FAILED
        update = RunUpdate(Status.FAILED, "work", error=INTERRUPTED) if done else None
        store.append("parent-1-c", 1 + i, [entry], update=update)
    store.close()
    # Entries 2, 3 and 4 (each start) were written by generations 1, 2 and 3, each SIGKILLed
    # before the entry that followed; entry 5 by generation 4.
    for gen, seq in ((1, 2), (2, 3), (3, 4), (4, 5)):
        (logs / f"chunks-{gen}.txt").write_text(f"RUN#parent-1-c J#{seq:010d}\n", encoding="utf-8")
    ledger = tmp_path / "ledger.sqlite"
    db = sqlite3.connect(ledger)
    db.executescript(LEDGER_SCHEMA)
    db.executemany(
        "INSERT INTO plans VALUES (?,?,?)", [("parent-1", "parent", "{}"), ("parent-1-c", "child", "{}")]
    )
    db.executemany(
        "INSERT INTO gens VALUES (?,?,?,?)",
        [
            (1, 0.0, 15.0, "sigkill"),
            (2, 15.0, 25.0, "sigkill"),
            (3, 25.0, 35.0, "sigkill"),
            (4, 35.0, None, None),
        ],
    )
    db.commit()
    db.close()
    report = Report(runs_planned=2, runs_not_as_expected=2)
    report.examples["runs_not_as_expected"] = [
        "parent-1: awaiting (no error)",
        f"parent-1-c: failed ({INTERRUPTED})",
    ]
    assert interrupted_by_kills(report, data, logs, ledger) == (1, 1)
    assert report.runs_not_as_expected == 0
    assert report.examples["runs_not_as_expected"] == []

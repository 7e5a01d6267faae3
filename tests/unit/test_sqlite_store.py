"""What the SQLite store does on disk that the backend-neutral contract suite cannot see:
a step's commit writes journal rows only, and data folders of the earlier schema open."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from runtime.core.journal import Entry, Kind
from runtime.errors import LunaflowError
from runtime.store.base import RunRecord, RunUpdate
from runtime.store.sqlite import SCHEMA_VERSION, SQLiteStore


def _writes_log(path: Path) -> None:
    """Record every row write of the tables a step could touch (a test-only audit)."""
    db = sqlite3.connect(str(path))
    db.executescript(
        """
        CREATE TABLE audit (tbl TEXT, op TEXT);
        CREATE TRIGGER a_runs AFTER UPDATE ON runs
            BEGIN INSERT INTO audit VALUES ('runs', 'update'); END;
        CREATE TRIGGER a_journal AFTER INSERT ON journal
            BEGIN INSERT INTO audit VALUES ('journal', 'insert'); END;
        CREATE TRIGGER a_timers AFTER INSERT ON timers
            BEGIN INSERT INTO audit VALUES ('timers', 'insert'); END;
        """
    )
    db.commit()
    db.close()


def _audit(path: Path) -> list[tuple[str, str]]:
    db = sqlite3.connect(str(path))
    try:
        return db.execute("SELECT tbl, op FROM audit").fetchall()
    finally:
        db.close()


def test_a_steps_commit_writes_journal_rows_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    store = SQLiteStore(path)
    run = RunRecord("r1", "wf", "running", {}, created_at=1.0, updated_at=1.0)
    store.create_run(run, Entry(1, Kind.STARTED, "wf", {"format": 1}, 1.0))
    _writes_log(path)
    result = Entry(2, Kind.STEP_RESULT, "a", {"n": 1, "values": [1]}, 2.0)
    intent = Entry(3, Kind.STEP_INTENT, "b", {"pass": 1, "attempt": 1, "step_id": "r1/b/1/1"}, 2.0)
    store.append("r1", 1, [result, intent], update=RunUpdate("running", "step 'b'", progress_only=True))
    assert _audit(path) == [("journal", "insert"), ("journal", "insert")]
    # A status change is not progress: it is written to the run's row.
    store.append("r1", 3, [], update=RunUpdate("sleeping", "step 'b'"))
    assert _audit(path)[2:] == [("runs", "update")]
    store.close()


SCHEMA_1 = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version VALUES (1);
CREATE TABLE runs (
    id TEXT PRIMARY KEY, workflow TEXT NOT NULL, status TEXT NOT NULL, input TEXT NOT NULL,
    result TEXT, error TEXT, parent_id TEXT, current_step TEXT, created_at REAL NOT NULL,
    updated_at REAL NOT NULL, journal_len INTEGER NOT NULL
);
CREATE INDEX runs_by_status ON runs (status, workflow, created_at);
CREATE INDEX runs_by_parent ON runs (parent_id);
CREATE TABLE journal (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, name TEXT, data TEXT NOT NULL,
    at REAL NOT NULL, PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
INSERT INTO runs VALUES
    ('old-1', 'wf', 'awaiting', '{"x":1}', NULL, NULL, NULL, 'await ''go''', 10.0, 12.0, 2);
INSERT INTO journal VALUES ('old-1', 1, 'run.started', 'wf', '{"format":1}', 10.0);
INSERT INTO journal VALUES
    ('old-1', 2, 'wait', 'await', '{"names":["go"],"timeout_ms":null,"due_at":null}', 12.0);
"""


def test_a_schema_1_data_folder_opens_and_keeps_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    db = sqlite3.connect(str(path))
    db.executescript(SCHEMA_1)
    db.commit()
    db.close()
    store = SQLiteStore(path)
    run = store.get_run("old-1")
    assert run is not None
    assert (run.status, run.current_step, run.journal_len, run.updated_at) == (
        "awaiting",
        "await 'go'",
        2,
        12.0,
    )
    assert [e.kind for e in store.journal("old-1")] == [Kind.STARTED, "wait"]
    store.close()
    db = sqlite3.connect(str(path))
    try:
        assert db.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,)
        columns = {r[1] for r in db.execute("PRAGMA table_info(runs)")}
        assert "journal_len" not in columns and "updated_at" not in columns
    finally:
        db.close()


def test_a_newer_schema_is_refused_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    SQLiteStore(path).close()
    db = sqlite3.connect(str(path))
    db.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    db.commit()
    db.close()
    with pytest.raises(LunaflowError, match="newer than this lunaflow's .*; upgrade lunaflow to open it"):
        SQLiteStore(path)


def test_a_data_folder_from_before_the_token_counter_issues_tokens_above_its_wakeups(
    tmp_path: Path,
) -> None:
    """A folder written before `wake_tokens` existed holds wake-ups with per-run tokens;
    the counter starts above all of them, so no token a worker may hold is issued again."""
    path = tmp_path / "store.sqlite"
    store = SQLiteStore(path)
    for rid in ("a", "b"):
        run = RunRecord(rid, "wf", "running", {}, created_at=1.0, updated_at=1.0)
        store.create_run(run, Entry(1, Kind.STARTED, "wf", {"format": 1}, 1.0))
    store.close()
    db = sqlite3.connect(str(path))
    db.executescript("DROP TABLE wake_tokens; UPDATE wakeups SET token = 5 WHERE run_id = 'a';")
    db.commit()
    db.close()
    store = SQLiteStore(path)
    store.add_wakeup("b")
    store.add_wakeup("a")
    tokens = dict(store.wakeups())
    assert tokens["b"] > 5 and tokens["a"] > tokens["b"]
    store.close()
    SQLiteStore(path).close()  # opening again adds no second counter
    db = sqlite3.connect(str(path))
    try:
        assert db.execute("SELECT last FROM wake_tokens").fetchall() == [(tokens["a"],)]
    finally:
        db.close()

"""What the SQLite store does on disk that the backend-neutral contract suite cannot see:
a step's commit writes journal rows only, and data folders of the earlier schema open."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from runtime.core.clock import FakeClock
from runtime.core.journal import Entry, Kind, Status
from runtime.errors import LunaflowError
from runtime.store.base import RunFilter, RunRecord, RunUpdate
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


# --- the console's reads (issue 24, section 3) ------------------------------------------------

WORKFLOWS = ("a", "b", "c")
STATUSES = ("completed", "awaiting", "failed", "running", "sleeping", "cancelled")


def _filled(path: Path, n: int) -> SQLiteStore:
    store = SQLiteStore(path, synchronous="OFF")
    for i in range(n):
        run = RunRecord(
            f"r{i:04d}", WORKFLOWS[i % 3], STATUSES[i % 6], {}, created_at=float(i), updated_at=float(i)
        )
        store.create_run(run, Entry(1, Kind.STARTED, run.workflow, {"format": 1}, float(i)))
    return store


# The orders the console lists runs in: newest first, alone, by status, by workflow, by both.
LIST_ORDERS = [
    "SELECT rowid FROM runs ORDER BY created_at DESC, rowid DESC LIMIT 51",
    "SELECT rowid FROM runs WHERE status = 'failed' ORDER BY created_at DESC, rowid DESC LIMIT 51",
    "SELECT rowid FROM runs WHERE workflow = 'a' ORDER BY created_at DESC, rowid DESC LIMIT 51",
    "SELECT rowid FROM runs WHERE status = 'failed' AND workflow = 'a' "
    "ORDER BY created_at DESC, rowid DESC LIMIT 51",
]


@pytest.mark.parametrize("query", LIST_ORDERS, ids=["all", "status", "workflow", "both"])
def test_every_order_the_list_reads_in_is_an_index_not_a_sort(tmp_path: Path, query: str) -> None:
    """Before: no index served ``ORDER BY created_at``, so every refresh of the list sorted
    the whole runs table (SCAN runs + USE TEMP B-TREE FOR ORDER BY)."""
    path = tmp_path / "store.sqlite"
    _filled(path, 30).close()
    db = sqlite3.connect(str(path))
    try:
        db.execute("ANALYZE")  # the plan with statistics, as a long-lived store has them
        plan = " / ".join(r[3] for r in db.execute("EXPLAIN QUERY PLAN " + query))
    finally:
        db.close()
    assert "TEMP B-TREE" not in plan and "USING COVERING INDEX" in plan, plan


def test_counts_per_status_are_kept_as_runs_change(tmp_path: Path) -> None:
    """The counts the console shows are kept by the store (no scan), and stay true through
    creates and status changes."""
    store = _filled(tmp_path / "store.sqlite", 60)
    store.append("r0001", 1, [], update=RunUpdate("completed", None))  # awaiting -> completed
    counts, capped = store.run_counts(RunFilter(), bound=10)
    assert not capped  # exact, however many runs: bound applies only to prefix and time searches
    assert counts == {
        "completed": 11,
        "awaiting": 9,
        "failed": 10,
        "running": 10,
        "sleeping": 10,
        "cancelled": 10,
    }
    of_b, _ = store.run_counts(RunFilter(workflow="b"), bound=10)  # runs 1, 4, 7, ...
    assert of_b == {"awaiting": 9, "completed": 1, "sleeping": 10}
    assert store.status_count("completed") == 11
    store.close()


def test_a_store_of_schema_4_gets_its_counts_and_indexes(tmp_path: Path) -> None:
    """Schema 5 adds the list's indexes and the kept counts; a schema 4 store's runs are
    counted once as it is migrated."""
    path = tmp_path / "store.sqlite"
    _filled(path, 12).close()
    db = sqlite3.connect(str(path))
    db.executescript(
        """
        DROP TRIGGER run_counts_insert; DROP TRIGGER run_counts_update; DROP TRIGGER run_counts_delete;
        DROP TABLE run_counts; DROP INDEX runs_by_created; DROP INDEX runs_by_status_created;
        DROP INDEX runs_by_workflow; UPDATE schema_version SET version = 4;
        """
    )
    db.commit()
    db.close()
    store = SQLiteStore(path)
    assert store.run_counts(RunFilter(), bound=100) == ({s: 2 for s in STATUSES}, False)
    run = RunRecord("new", "a", "running", {}, created_at=99.0, updated_at=99.0)
    store.create_run(run, Entry(1, Kind.STARTED, "a", {"format": 1}, 99.0))
    assert store.status_count("running") == 3
    store.close()
    db = sqlite3.connect(str(path))
    try:
        assert db.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,)
    finally:
        db.close()


def test_a_reader_answers_while_a_writer_of_this_process_waits_in_its_transaction(tmp_path: Path) -> None:
    """Before: every read took the store's one lock, so while a write of this process waited
    (here, for another process's write transaction; in the issue, behind a slow list query)
    every console request, and every other run's read, waited with it. Readers have their
    own connections now: WAL lets them read the last commit meanwhile."""
    path = tmp_path / "store.sqlite"
    store = _filled(path, 5)
    other = sqlite3.connect(str(path), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's write transaction, held open
    writer_done = threading.Event()

    def write() -> None:  # takes the store's writer lock, then waits for the file's write lock
        run = RunRecord("late", "a", "running", {}, created_at=50.0, updated_at=50.0)
        store.create_run(run, Entry(1, Kind.STARTED, "a", {"format": 1}, 50.0))
        writer_done.set()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        writer.join(0.3)
        assert writer.is_alive()  # the writer is inside its transaction, waiting
        read: list[object] = []
        reader = threading.Thread(
            target=lambda: read.extend(
                [
                    store.list_runs(limit=3),
                    store.get_run("r0001"),
                    store.load("r0002"),
                    store.journal("r0003"),
                ]
            ),
            daemon=True,
        )
        reader.start()
        reader.join(20)  # the writer waits up to 30 s for the file: a reader behind it would too
        assert not reader.is_alive() and not writer_done.is_set()
        assert [r.id for r in read[0]] == ["r0004", "r0003", "r0002"]  # type: ignore[attr-defined]
    finally:
        other.execute("ROLLBACK")
        other.close()
    writer.join(20)
    assert writer_done.is_set() and store.get_run("late") is not None
    store.close()


def _published(store: SQLiteStore, run_id: str, created: float, month: int) -> None:
    run = RunRecord(run_id, "a", "running", {}, created_at=created, updated_at=created)
    store.create_run(run, Entry(1, Kind.STARTED, "a", {"format": 1}, created))
    entries = [Entry(2, Kind.VALUE_SET, "month", {"value": month}, created)]
    store.append(run_id, 1, entries)


def test_a_store_of_schema_5_gets_the_values_table(tmp_path: Path) -> None:
    """Schema 6 adds run_values and its indexes; a schema 5 store opens, its runs kept, and
    takes published values from then on."""
    path = tmp_path / "store.sqlite"
    _filled(path, 3).close()
    db = sqlite3.connect(str(path))
    db.executescript(
        "DROP INDEX run_values_by_num; DROP INDEX run_values_by_value; DROP TABLE run_values; "
        "UPDATE schema_version SET version = 5;"
    )
    db.commit()
    db.close()
    store = SQLiteStore(path)
    assert len(store.list_runs()) == 3
    _published(store, "v-1", 50.0, 7)
    assert store.run_values("v-1") == {"month": 7}
    store.close()
    db = sqlite3.connect(str(path))
    try:
        assert db.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,) == (8,)
    finally:
        db.close()


def test_a_store_of_schema_6_gets_the_flow_control_tables(tmp_path: Path) -> None:
    """Schema 7 adds the flow control tables; a schema 6 store opens, its runs kept, and its
    runs can take slots from then on (an end releases them in its write)."""
    from runtime.core.flow import SlotWant

    path = tmp_path / "store.sqlite"
    _filled(path, 3).close()
    db = sqlite3.connect(str(path))
    flow_tables = [
        r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'flow_%'")
    ]
    assert len(flow_tables) == 8
    db.executescript(
        "".join(f"DROP TABLE {t};" for t in flow_tables) + "UPDATE schema_version SET version = 6;"
    )
    db.commit()
    db.close()
    store = SQLiteStore(path)
    try:
        assert len(store.list_runs()) == 3
        run_id = store.list_runs()[0].id
        assert store.admit(run_id, [SlotWant("w", 1, "w")], 0).admitted
        assert [v.holders for v in store.slot_views()] == [[run_id]]
    finally:
        store.close()


@pytest.mark.parametrize("where", ["month=7", "month>=3", "month<3", "plan=gold"])
def test_a_search_by_value_reads_the_values_index(tmp_path: Path, where: str) -> None:
    """No scan of runs or journals: run_values' index on (key, value or num) serves it."""
    from runtime.core.published import parse_where

    store = SQLiteStore(tmp_path / "store.sqlite")
    for i in range(5):
        _published(store, f"v-{i}", float(i), i)
    plan = " ".join(store.plan_of_find(parse_where(where)))
    assert "run_values_by_" in plan and "SCAN" not in plan.replace("SCAN TABLE", "SCAN"), plan
    assert [r.id for r in store.find_runs(parse_where("month>=3"))] == ["v-4", "v-3"]
    store.close()


def _schema_7(path: Path) -> None:
    """The store at ``path`` as lunaflow wrote it before retention (schema 7)."""
    db = sqlite3.connect(str(path))
    db.executescript(
        "DROP INDEX runs_by_expiry; ALTER TABLE runs DROP COLUMN expires_at; "
        "UPDATE schema_version SET version = 7;"
    )
    db.commit()
    db.close()


def test_a_store_of_schema_7_gets_expiries_its_ended_runs_kept_and_new_ends_expiring(tmp_path: Path) -> None:
    """Schema 8 adds runs.expires_at and its index: a schema 7 store opens, its runs (those
    that ended too) carry no expiry and are kept, and a run that ends from then on expires."""
    path = tmp_path / "store.sqlite"
    store = _filled(path, 6)  # r0003 is completed, r0005 cancelled
    store.close()
    _schema_7(path)
    clock = FakeClock(1_000.0)
    store = SQLiteStore(path, clock=clock)
    store.retention_s = 86_400.0
    store.append(
        "r0000",
        1,
        [Entry(2, Kind.COMPLETED, None, {"result": 1}, 1_000.0)],
        update=RunUpdate(Status.COMPLETED, None, result=1),
    )
    clock.advance(86_401)
    assert store.expire(clock.now()) == ["r0000"]
    assert len(store.list_runs()) == 5
    store.close()
    db = sqlite3.connect(str(path))
    try:
        assert db.execute("SELECT version FROM schema_version").fetchone() == (8,)
        assert db.execute("SELECT name FROM sqlite_master WHERE name = 'runs_by_expiry'").fetchone()
    finally:
        db.close()


def test_a_read_only_open_of_a_schema_7_store_reads_it_and_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    _filled(path, 3).close()
    _schema_7(path)
    before = path.read_bytes()
    store = SQLiteStore(path, read_only=True)
    assert len(store.list_runs()) == 3
    store.close()
    assert path.read_bytes() == before

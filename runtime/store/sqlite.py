"""The store on one SQLite file: WAL, ``synchronous=FULL`` by default, a schema version.

One writing connection, guarded by a lock, so one process may share the store across
threads; reads go through a pool of read-only connections of their own, which WAL lets
read while a write transaction is open, so a reader (an open console tab, a listing)
never waits for the writers' lock and a writer never waits for a reader. Several processes
may open the same file: every write is one transaction, and a journal append is
conditional on the run's journal length, so only one writer can win a slot.

The console's runs list is served from indexes: one per order it lists in (newest first,
by status, by workflow, by both), and ``run_counts``, the runs per workflow and status,
kept by triggers as runs are created and change status, so counting is a read of a few
rows, not of every run.

A run's journal length, last change and current step are read from its last journal
entry rather than kept on its row: a step's commit (its result and the next intent) then
writes nothing but journal rows, one WAL page where a row update would add two (the run's
page and its status index), and the fsync that every commit pays covers less.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runtime.core import published
from runtime.core.clock import Clock, SystemClock
from runtime.core.flow import Admission, Collect, Rate, SlotView, SlotWant
from runtime.core.journal import ENDED, Entry, Kind, Signal, Status
from runtime.core.published import Where
from runtime.core.values import compact
from runtime.errors import (
    JournalConflict,
    LunaflowError,
    NoSuchRun,
    SignalBacklogFull,
    StoreUnreadable,
)
from runtime.store import sqlite_flow
from runtime.store.base import (
    OWNER_DEAD_AFTER_MS,
    FirstSignal,
    Lease,
    Progress,
    RunFilter,
    RunRecord,
    RunUpdate,
    SignalRecord,
    Snapshot,
    TimerSet,
    checked_update,
    current_step,
)

SCHEMA_VERSION = 8
# The store's file in a data folder (`lunaflow dev`, the CLI and the harness share it).
STORE_FILE = "lunaflow.sqlite"

# Pages the WAL may hold before the committing connection copies it back (a checkpoint),
# and the size the WAL file is given when the store opens (see _preallocate_wal).
WAL_CHECKPOINT_PAGES = 256
WAL_PREALLOCATE_PAGES = 300
# Idle read connections kept for reuse; more may be open at once, and are closed after use.
READERS_KEPT = 8

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    status TEXT NOT NULL,
    input TEXT NOT NULL,
    result TEXT,
    error TEXT,
    parent_id TEXT,
    current_step TEXT,
    created_at REAL NOT NULL,
    -- When the status last changed without a journal entry saying so (schema 5): a failure
    -- by a raise or a divergence. A run's `updated_at` is the later of this and its last entry.
    -- `expires_at` (schema 8): when an ended run is deleted, its end + the retention, or NULL.
    changed_at REAL,
    expires_at REAL
);
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, workflow, created_at);
CREATE INDEX IF NOT EXISTS runs_by_parent ON runs (parent_id);
-- The console lists runs newest first, alone or by status or by workflow (by both:
-- runs_by_status): each order an index, so a page reads its rows and no sort runs.
CREATE INDEX IF NOT EXISTS runs_by_created ON runs (created_at);
CREATE INDEX IF NOT EXISTS runs_by_status_created ON runs (status, created_at);
CREATE INDEX IF NOT EXISTS runs_by_workflow ON runs (workflow, created_at);
-- Runs per workflow and status, kept by the triggers below (schema 5): the console's counts.
CREATE TABLE IF NOT EXISTS run_counts (
    workflow TEXT NOT NULL,
    status TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (workflow, status)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS run_counts_insert AFTER INSERT ON runs BEGIN
    INSERT INTO run_counts VALUES (NEW.workflow, NEW.status, 1)
        ON CONFLICT (workflow, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS run_counts_update AFTER UPDATE OF status, workflow ON runs
WHEN OLD.status IS NOT NEW.status OR OLD.workflow IS NOT NEW.workflow BEGIN
    UPDATE run_counts SET n = n - 1 WHERE workflow = OLD.workflow AND status = OLD.status;
    INSERT INTO run_counts VALUES (NEW.workflow, NEW.status, 1)
        ON CONFLICT (workflow, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS run_counts_delete AFTER DELETE ON runs BEGIN
    UPDATE run_counts SET n = n - 1 WHERE workflow = OLD.workflow AND status = OLD.status;
END;
CREATE TABLE IF NOT EXISTS journal (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    name TEXT,
    data TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS signals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    payload TEXT NOT NULL,
    at REAL NOT NULL,
    state TEXT NOT NULL,
    consumed_seq INTEGER
);
CREATE INDEX IF NOT EXISTS signals_pending ON signals (run_id, state, id);
CREATE TABLE IF NOT EXISTS timers (
    run_id TEXT PRIMARY KEY,
    due_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS timers_by_due ON timers (due_ms);
-- A wake-up's `at` (epoch seconds) tells the reconciler's query how long it has waited.
CREATE TABLE IF NOT EXISTS wakeups (run_id TEXT PRIMARY KEY, token INTEGER NOT NULL, at REAL NOT NULL);
-- One counter for every wake token: a token never repeats, even after its wake-up row is
-- deleted, so a worker clearing the wake-up it read late cannot clear a newer one.
CREATE TABLE IF NOT EXISTS wake_tokens (last INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS secrets (
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (name, version)
);
CREATE TABLE IF NOT EXISTS leases (run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, until_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS owners (owner TEXT PRIMARY KEY, beat_ms INTEGER NOT NULL);
-- A cancel's intent, written before the run is cancelled and deleted once its cascade is
-- done: a row left behind is a cascade a crash cut short (see Runs.finish_cancels).
CREATE TABLE IF NOT EXISTS cancels (run_id TEXT PRIMARY KEY, at REAL NOT NULL);
-- The latest value per key each run published with wf:set (schema 6), written in the
-- journal's own transaction. `value` is its JSON text (strings and booleans match on it),
-- `num` a number's value (ranges read it); `created_at` is the run's, so a search lists
-- newest first from the index alone.
CREATE TABLE IF NOT EXISTS run_values (
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    num REAL,
    created_at REAL NOT NULL,
    PRIMARY KEY (run_id, key)
);
CREATE INDEX IF NOT EXISTS run_values_by_num ON run_values (key, num, created_at);
CREATE INDEX IF NOT EXISTS run_values_by_value ON run_values (key, value, created_at);
CREATE TABLE IF NOT EXISTS secret_pins (
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (run_id, name)
);
"""

_RUN_COLUMNS = "id, workflow, status, input, result, error, parent_id, current_step, created_at"
# A run's row beside its last journal entry (every run has entry 1): `r` is the runs table
# or a subquery of it.
_LAST_ENTRY = (
    "JOIN journal j ON j.run_id = r.id AND j.seq = (SELECT MAX(seq) FROM journal WHERE run_id = r.id)"
)
_RUN_SELECT = (
    "SELECT r.id, r.workflow, r.status, r.input, r.result, r.error, r.parent_id, r.current_step, "
    "r.created_at, MAX(j.at, COALESCE(r.changed_at, j.at)), j.seq, j.kind, j.name, r.expires_at"
)
# What each older schema lacks, as (table, column, statement): schema 1 kept the journal's
# length and the last change on the run's row; schema 2's wake-ups had no time. A statement
# runs only where the table still differs (a table the schema script just made is current);
# an empty column: always.
_MIGRATIONS = {
    1: (
        ("runs", "updated_at", "ALTER TABLE runs DROP COLUMN updated_at"),
        ("runs", "journal_len", "ALTER TABLE runs DROP COLUMN journal_len"),
    ),
    2: (("wakeups", "-at", "ALTER TABLE wakeups ADD COLUMN at REAL NOT NULL DEFAULT 0"),),
    # Schema 4 adds the `cancels` table, which the schema script creates; the version moves
    # so that an older lunaflow, which would ignore unfinished cascades, refuses the file.
    3: (),
    # Schema 5: the list's indexes and `run_counts` with its triggers (the schema script
    # makes them); the counts of the runs already there are taken once, here, in the
    # migration's transaction (a run another process adds meanwhile waits for it).
    4: (
        ("runs", "-changed_at", "ALTER TABLE runs ADD COLUMN changed_at REAL"),
        ("run_counts", "", "DELETE FROM run_counts"),
        (
            "run_counts",
            "",
            "INSERT INTO run_counts SELECT workflow, status, COUNT(*) FROM runs GROUP BY workflow, status",
        ),
    ),
    # Schema 6: `run_values` and its indexes (the schema script makes them). No run of an
    # older schema published a value, so there is nothing to fill in.
    5: (),
    # Schema 7: the flow control tables (runtime.store.sqlite_flow; the schema script makes
    # them). No run of an older schema passed a gate.
    6: (),
    # Schema 8: `runs.expires_at` (retention). Runs that ended before keep NULL: kept.
    7: (("runs", "-expires_at", "ALTER TABLE runs ADD COLUMN expires_at REAL"),),
}
# Made after the migrations, on columns they may add: the sweep's order (only runs that
# will expire are in it).
_AFTER_MIGRATIONS = (
    "CREATE INDEX IF NOT EXISTS runs_by_expiry ON runs (expires_at) WHERE expires_at IS NOT NULL;"
)
# A run kept past its expiry (a child whose parent still runs, an unfinished cascade) is
# looked at again this much later.
EXPIRY_PUT_OFF_S = 86_400.0
# What a run keeps beside its row, keyed by its id: deleted with it at its expiry.
_RUN_TABLES = ("journal", "signals", "timers", "wakeups", "leases", "run_values", "secret_pins")


def _differs(db: sqlite3.Connection, table: str, column: str) -> bool:
    """Whether ``table`` has ``column`` (or, for ``-column``, lacks it); always, for ``""``."""
    if not column:
        return True
    columns = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
    return column[1:] not in columns if column.startswith("-") else column in columns


def _where(where: RunFilter, status: str | None) -> tuple[str, list[Any]]:
    """The WHERE clause of a search of the runs table, and its arguments."""
    terms: list[str] = []
    args: list[Any] = []
    if status is not None:
        terms.append("status = ?")
        args.append(status)
    if where.workflow is not None:
        terms.append("workflow = ?")
        args.append(where.workflow)
    if where.id_prefix:
        # A range of the primary key (binary order: what str.startswith means), not a LIKE,
        # which would be case-blind and read every id.
        terms.append("id >= ?")
        args.append(where.id_prefix)
        last = where.id_prefix[-1]
        if ord(last) < 0x10FFFF:
            terms.append("id < ?")
            after = ord(last) + 1
            after = 0xE000 if 0xD800 <= after < 0xE000 else after  # no surrogate: not UTF-8
            args.append(where.id_prefix[:-1] + chr(after))
    if where.since is not None:
        terms.append("created_at >= ?")
        args.append(where.since)
    if where.until is not None:
        terms.append("created_at < ?")
        args.append(where.until)
    return (f"WHERE {' AND '.join(terms)}" if terms else ""), args


def _page_sql(where: RunFilter, status: str | None) -> tuple[str, list[Any]]:
    """The row ids of a page of runs, newest first: read from the index of its order alone
    (OFFSET skips index entries, not rows); the LIMIT and OFFSET are its last two arguments."""
    clause, args = _where(where, status)
    return (
        f"SELECT rowid AS rid FROM runs {clause} ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?",
        args,
    )


def _num(value: Any) -> float | None:
    """A published number's value for ``run_values.num`` (a boolean is not a number)."""
    return None if isinstance(value, bool) or not isinstance(value, int | float) else float(value)


def _value_term(where: Where) -> tuple[str, list[Any]]:
    """The condition on ``run_values v`` (its key aside) that ``where`` asks for."""
    number = _num(where.value)
    if where.op in ("=", "!="):
        term = "v.num = ?" if number is not None else "v.value = ?"
        arg = number if number is not None else compact(where.value)
        if where.op == "!=":
            return f"NOT ({term} IS TRUE)", [arg]
        return term, [arg]
    return f"v.num {where.op} ?", [number]


def _run(row: sqlite3.Row) -> RunRecord:
    """A row of ``_RUN_SELECT``: the run's row and its last journal entry."""
    last = Entry(row[10], Kind(row[11]), row[12], {}, row[9])
    status = Status(row[2])
    return RunRecord(
        id=row[0],
        workflow=row[1],
        status=status,
        input=json.loads(row[3]),
        result=None if row[4] is None else json.loads(row[4]),
        error=row[5],
        parent_id=row[6],
        current_step=current_step(status, row[7], last),
        created_at=row[8],
        updated_at=row[9],
        journal_len=row[10],
        expires_at=row[13],
    )


_PENDING_SIGNALS = (
    "SELECT id, name, payload, at FROM signals WHERE run_id = ? AND state = 'pending' ORDER BY id"
)


@functools.lru_cache(maxsize=16)
def _append_sql(count: int) -> str:
    rows = ",".join(["(?,?,?,?,?,?)"] * count)
    return (
        "INSERT INTO journal (run_id, seq, kind, name, data, at) "
        f"SELECT column1, column2, column3, column4, column5, column6 FROM (VALUES {rows}) "
        "WHERE (SELECT MAX(seq) FROM journal WHERE run_id = ?) = ?"
    )


class SQLiteStore:
    """``runtime.store.base.Store`` on a SQLite file."""

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: str = "FULL",
        clock: Clock | None = None,
        read_only: bool = False,
    ) -> None:
        """``read_only``: for commands that only read (``lunaflow check``, ``record``): the
        file is neither created nor migrated nor written (writes fail). Data of an older
        schema is read through a migrated copy in a temporary folder."""
        self.path = Path(path)
        self.clock: Clock = clock or SystemClock()
        self._lock = threading.RLock()  # the writer's: held for a write, never for a read
        self._copy: Path | None = None  # the temporary folder of a read-only copy
        self._read_only = read_only
        self._readers: list[sqlite3.Connection] = []  # idle read connections
        self._readers_lock = threading.Lock()
        self._closed = False
        if read_only:
            try:
                self._db = self._open_read_only()
            except sqlite3.DatabaseError as e:  # not a database, or a malformed one
                raise StoreUnreadable(str(self.path), str(e)) from None
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(
            str(self.path), isolation_level=None, check_same_thread=False, timeout=30.0
        )
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
            self._migrate()
        except sqlite3.DatabaseError as e:  # not a database, or a malformed one
            self._db.close()
            raise StoreUnreadable(str(self.path), str(e)) from None
        if synchronous.upper() in ("FULL", "EXTRA"):
            self._preallocate_wal()

    def _open_read_only(self) -> sqlite3.Connection:
        if not self.path.is_file():
            raise LunaflowError(f"no lunaflow data in {self.path.parent} (no {self.path.name})")
        db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False, timeout=30.0)
        db.execute("PRAGMA query_only=ON")  # a write fails before it changes anything
        known = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
        ).fetchone()
        row = db.execute("SELECT version FROM schema_version").fetchone() if known else None
        if row is not None and row[0] == SCHEMA_VERSION:
            return db
        if row is not None and row[0] > SCHEMA_VERSION:
            db.close()
            raise LunaflowError(
                f"the data in {self.path} has schema version {row[0]}, newer than this "
                f"lunaflow's {SCHEMA_VERSION}; upgrade lunaflow to open it"
            )
        # An older schema: migrate a copy, never the data itself.
        self._copy = Path(tempfile.mkdtemp(prefix="lunaflow-read-"))
        copy = sqlite3.connect(str(self._copy / self.path.name), isolation_level=None)
        try:
            db.backup(copy)
        finally:
            copy.close()
            db.close()
        self._db = sqlite3.connect(
            str(self._copy / self.path.name), isolation_level=None, check_same_thread=False, timeout=30.0
        )
        self._migrate()
        self._db.execute("PRAGMA query_only=ON")
        return self._db

    def _migrate(self) -> None:
        with self._lock:
            self._db.executescript(_SCHEMA + sqlite_flow.SCHEMA)
            with self._write() as db:
                row = db.execute("SELECT version FROM schema_version").fetchone()
                if row is None:
                    db.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
                elif row[0] > SCHEMA_VERSION:
                    raise LunaflowError(
                        f"the data in {self.path} has schema version {row[0]}, newer than this "
                        f"lunaflow's {SCHEMA_VERSION}; upgrade lunaflow to open it"
                    )
                db.execute(
                    "INSERT INTO wake_tokens SELECT COALESCE((SELECT MAX(token) FROM wakeups), 0) "
                    "WHERE NOT EXISTS (SELECT 1 FROM wake_tokens)"
                )
                if row is not None and row[0] < SCHEMA_VERSION:
                    for version in range(row[0], SCHEMA_VERSION):
                        for table, column, statement in _MIGRATIONS[version]:
                            if _differs(db, table, column):
                                db.execute(statement)
                    db.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
            self._db.executescript(_AFTER_MIGRATIONS)

    def _preallocate_wal(self) -> None:
        """Give a new WAL file its working size before the first commit.

        After a checkpoint SQLite rewrites the WAL from its start, and syncing a write
        that overwrites a file is several times cheaper on ext4 than syncing one that
        grows it (no extent or size to journal): 0.1 ms against 0.3-1 ms here. A fresh
        WAL would grow through its first few hundred commits; this grows it at once, with
        SQLite's own frames: a transaction too big for a tiny page cache spills its pages
        into the WAL and is rolled back, which leaves the file its size and the database
        untouched. The file is then synced once, so no commit pays for the spill.
        """
        wal = self.path.with_name(self.path.name + "-wal")
        page = self._db.execute("PRAGMA page_size").fetchone()[0]
        target = WAL_PREALLOCATE_PAGES * (page + 24)
        if not wal.exists() or wal.stat().st_size >= target:
            return
        with self._lock:
            cache = self._db.execute("PRAGMA cache_size").fetchone()[0]
            self._db.execute("PRAGMA cache_size=16")
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.execute("CREATE TABLE lunaflow_wal_padding (b BLOB)")
                    self._db.execute(
                        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
                        "INSERT INTO lunaflow_wal_padding SELECT zeroblob(?) FROM n",
                        (WAL_PREALLOCATE_PAGES, page - 100),
                    )
                finally:
                    self._db.execute("ROLLBACK")
            finally:
                self._db.execute(f"PRAGMA cache_size={cache}")
            fd = os.open(wal, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    @contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        """A read connection of this thread's own while the block runs. In WAL mode it reads
        the last commit while a writer (this process's or another's) holds its transaction,
        so reads never take the writer's lock. A read-only store (a CLI command: no writer
        beside it in this process) reads on its one connection."""
        if self._read_only:
            with self._lock:
                yield self._db
            return
        with self._readers_lock:
            db = self._readers.pop() if self._readers else None
        if db is None:
            db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False, timeout=30.0)
            db.execute("PRAGMA query_only=ON")  # a reader cannot write, whatever it is given
        try:
            yield db
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")
            with self._readers_lock:
                keep = not self._closed and len(self._readers) < READERS_KEPT
                if keep:
                    self._readers.append(db)
            if not keep:
                db.close()

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """A reader inside one read transaction: every statement sees the same commit."""
        with self._reader() as db:
            if db.in_transaction:  # the read-only store's connection, already reading
                yield db
                return
            db.execute("BEGIN")
            try:
                yield db
            finally:
                db.execute("COMMIT")

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._reader() as db:
            return db.execute(sql, args).fetchall()

    # --- runs --------------------------------------------------------------------------

    def create_run(
        self, run: RunRecord, started: Entry, signal: FirstSignal | None = None
    ) -> tuple[RunRecord, bool]:
        with self._write() as db:
            row = db.execute(f"{_RUN_SELECT} FROM runs r {_LAST_ENTRY} WHERE r.id = ?", (run.id,)).fetchone()
            if row is not None:
                return _run(row), False
            self._insert_run(db, run, started, signal)
        return RunRecord(**{**run.__dict__, "journal_len": 1, "updated_at": started.at}), True

    def _insert_run(
        self, db: sqlite3.Connection, run: RunRecord, started: Entry, signal: FirstSignal | None
    ) -> None:
        db.execute(
            f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
            (
                run.id,
                run.workflow,
                run.status,
                compact(run.input),
                None,
                None,
                run.parent_id,
                None,
                run.created_at,
            ),
        )
        self._insert_entries(db, run.id, [started])
        if signal is not None:  # signal-with-start: the run and its signal commit together
            db.execute(
                "INSERT INTO signals (run_id, name, payload, at, state) VALUES (?,?,?,?,'pending')",
                (run.id, signal.name, compact(signal.payload), signal.at),
            )
        self._add_wakeup(db, run.id, run.created_at)

    def collect(
        self, run: RunRecord, started: Entry, key: str, spec: Collect, now_ms: int
    ) -> tuple[RunRecord, bool]:
        admitted: list[str] = []
        with self._write() as db:

            def create(db: sqlite3.Connection) -> None:
                self._insert_run(db, run, started, None)

            def wake(db: sqlite3.Connection, run_id: str) -> None:
                self._wake_admitted(db, run_id)
                admitted.append(run_id)

            run_id = sqlite_flow.collect(db, run, key, spec, now_ms, create, wake)
            row = db.execute(f"{_RUN_SELECT} FROM runs r {_LAST_ENTRY} WHERE r.id = ?", (run_id,)).fetchone()
        self._tell_admitted(admitted)
        return _run(row), run_id == run.id

    def close_collection(self, run_id: str, spec: Collect, now_ms: int) -> list[Any] | int | None:
        with self._write() as db:
            return sqlite_flow.close(db, run_id, spec, now_ms)

    def child_state(self, run_id: str) -> RunRecord | None:
        return self.get_run(run_id)  # the data file's schema version guards the whole file

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._read(f"{_RUN_SELECT} FROM runs r {_LAST_ENTRY} WHERE r.id = ?", (run_id,))
        return _run(rows[0]) if rows else None

    def load(self, run_id: str, *, after: int | None = None) -> Snapshot | None:
        with self._snapshot() as db:
            row = db.execute(f"{_RUN_SELECT} FROM runs r {_LAST_ENTRY} WHERE r.id = ?", (run_id,)).fetchone()
            if row is None:
                return None
            rows = db.execute(
                "SELECT seq, kind, name, data, at FROM journal WHERE run_id = ? AND seq > ? ORDER BY seq",
                (run_id, after or 0),
            ).fetchall()
            pending = db.execute(_PENDING_SIGNALS, (run_id,)).fetchall()
        entries = [Entry(r[0], Kind(r[1]), r[2], json.loads(r[3]), r[4]) for r in rows]
        return Snapshot(_run(row), [Signal(r[0], r[1], json.loads(r[2]), r[3]) for r in pending], entries)

    def list_runs(
        self, *, status: str | None = None, workflow: str | None = None, limit: int = 1000
    ) -> list[RunRecord]:
        return self.search_runs(RunFilter(workflow=workflow), status=status, offset=0, limit=limit)

    def in_flight_runs(self, limit: int = 1_000_000) -> list[RunRecord]:
        runs = [
            r for status in Status if status not in ENDED for r in self.list_runs(status=status, limit=limit)
        ]
        return sorted(runs, key=lambda r: r.created_at, reverse=True)[:limit]

    def search_runs(
        self, where: RunFilter, *, status: str | None, offset: int, limit: int
    ) -> list[RunRecord]:
        # The page's row ids first, then those runs with each one's last entry.
        page, args = _page_sql(where, status)
        rows = self._read(
            f"{_RUN_SELECT} FROM (SELECT runs.*, p.rid FROM ({page}) p JOIN runs ON runs.rowid = p.rid) r "
            f"{_LAST_ENTRY} ORDER BY r.created_at DESC, r.rid DESC",
            (*args, limit, offset),
        )
        return [_run(r) for r in rows]

    def plan_of_search(self, where: RunFilter, status: str | None) -> list[str]:
        """How SQLite reads a page of ``search_runs`` (EXPLAIN QUERY PLAN): for tests and
        bench/console_list.py, which check that an index serves it and nothing sorts."""
        page, args = _page_sql(where, status)
        return [r[3] for r in self._read(f"EXPLAIN QUERY PLAN {page}", (*args, 51, 0))]

    def run_counts(self, where: RunFilter, *, bound: int) -> tuple[dict[str, int], bool]:
        if where.only_workflow:
            clause = "" if where.workflow is None else "WHERE workflow = ?"
            args = () if where.workflow is None else (where.workflow,)
            rows = self._read(f"SELECT status, SUM(n) FROM run_counts {clause} GROUP BY status", args)
            return {r[0]: int(r[1]) for r in rows if r[1]}, False
        # An id prefix or a time: the newest `bound` matching runs, and whether there were more.
        clause, wargs = _where(where, None)
        rows = self._read(
            f"SELECT status, COUNT(*) FROM (SELECT status FROM runs {clause} "
            "ORDER BY created_at DESC, rowid DESC LIMIT ?) GROUP BY status",
            (*wargs, bound + 1),
        )
        counts = {r[0]: int(r[1]) for r in rows}
        capped = sum(counts.values()) > bound
        if capped:  # one run too many was read to tell: take one off the oldest's status
            oldest = self._read(
                f"SELECT status FROM runs {clause} ORDER BY created_at DESC, rowid DESC LIMIT 1 OFFSET ?",
                (*wargs, bound),
            )
            counts[oldest[0][0]] -= 1
        return counts, capped

    def run_values(self, run_id: str) -> dict[str, Any]:
        rows = self._read("SELECT key, value FROM run_values WHERE run_id = ? ORDER BY key", (run_id,))
        return {r[0]: json.loads(r[1]) for r in rows}

    def find_runs(
        self, where: Where, *, workflow: str | None = None, status: str | None = None, limit: int = 1000
    ) -> list[RunRecord]:
        # Driven by run_values' index on (key, value or num): the runs holding the value,
        # never every run's row, nor any journal.
        term, args = _value_term(where)
        extra = "" if workflow is None else " AND runs.workflow = ?"
        extra += "" if status is None else " AND runs.status = ?"
        page = (
            "SELECT runs.rowid AS rid, v.created_at AS vat FROM run_values v JOIN runs ON runs.id = v.run_id "
            f"WHERE v.key = ? AND {term}{extra} ORDER BY v.created_at DESC LIMIT ?"
        )
        rows = self._read(
            f"{_RUN_SELECT} FROM (SELECT runs.*, p.rid FROM ({page}) p JOIN runs ON runs.rowid = p.rid) r "
            f"{_LAST_ENTRY} ORDER BY r.created_at DESC, r.rid DESC",
            (
                where.key,
                *args,
                *(() if workflow is None else (workflow,)),
                *(() if status is None else (status,)),
                limit,
            ),
        )
        return [_run(r) for r in rows]

    def plan_of_find(self, where: Where) -> list[str]:
        """How SQLite reads ``find_runs`` (EXPLAIN QUERY PLAN): tests check an index serves it."""
        term, args = _value_term(where)
        return [
            r[3]
            for r in self._read(
                f"EXPLAIN QUERY PLAN SELECT run_id FROM run_values v WHERE v.key = ? AND {term} "
                "ORDER BY v.created_at DESC LIMIT 50",
                (where.key, *args),
            )
        ]

    def children(self, run_id: str) -> list[str]:
        rows = self._read("SELECT id FROM runs WHERE parent_id = ? ORDER BY created_at", (run_id,))
        return [r[0] for r in rows]

    # --- cancel intents ----------------------------------------------------------------

    def begin_cancel(self, run_id: str, at: float) -> None:
        with self._write() as db:
            db.execute("INSERT INTO cancels VALUES (?, ?) ON CONFLICT (run_id) DO NOTHING", (run_id, at))

    def end_cancel(self, run_id: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM cancels WHERE run_id = ?", (run_id,))

    def pending_cancels(self, before: float | None = None) -> list[str]:
        rows = self._read(
            "SELECT run_id FROM cancels WHERE at < ? ORDER BY at, run_id",
            (float("inf") if before is None else before,),
        )
        return [r[0] for r in rows]

    # --- journal -----------------------------------------------------------------------

    def journal(self, run_id: str) -> list[Entry]:
        rows = self._read(
            "SELECT seq, kind, name, data, at FROM journal WHERE run_id = ? ORDER BY seq", (run_id,)
        )
        return [Entry(r[0], Kind(r[1]), r[2], json.loads(r[3]), r[4]) for r in rows]

    def _insert_entries(self, db: sqlite3.Connection, run_id: str, entries: Sequence[Entry]) -> None:
        try:
            db.executemany(
                "INSERT INTO journal (run_id, seq, kind, name, data, at) VALUES (?,?,?,?,?,?)",
                [(run_id, e.seq, e.kind, e.name, compact(e.data), e.at) for e in entries],
            )
        except sqlite3.IntegrityError as e:
            raise JournalConflict(run_id, entries[0].seq) from e

    def _append_entries(self, run_id: str, expected_len: int, entries: Sequence[Entry]) -> None:
        """Entries alone, in one statement (its own transaction): inserted only while the
        journal is ``expected_len`` long. The length is read once per statement, before any
        row goes in; a slot already taken fails the primary key."""
        args: list[Any] = []
        for e in entries:
            args += (run_id, e.seq, e.kind, e.name, compact(e.data), e.at)
        args += (run_id, expected_len)
        with self._lock:
            try:
                cur = self._db.execute(_append_sql(len(entries)), args)
            except sqlite3.IntegrityError as e:
                raise JournalConflict(run_id, expected_len + 1) from e
        if cur.rowcount != len(entries):
            raise JournalConflict(run_id, expected_len + 1)

    def append(
        self,
        run_id: str,
        expected_len: int,
        entries: Sequence[Entry],
        *,
        update: RunUpdate | None = None,
        timer: TimerSet | None = None,
    ) -> None:
        update = checked_update(run_id, expected_len, entries, update)
        consumes = [e for e in entries if e.kind == Kind.WAIT_DONE and e.data.get("signal_id") is not None]
        sets = published.latest(entries)
        if update is None and timer is None and not consumes and not sets:
            if entries:
                self._append_entries(run_id, expected_len, entries)
            return
        admitted: list[str] = []
        with self._write() as db:
            length = db.execute("SELECT MAX(seq) FROM journal WHERE run_id = ?", (run_id,)).fetchone()[0]
            if length != expected_len:
                raise JournalConflict(run_id, expected_len + 1)
            if update is not None:
                db.execute(
                    "UPDATE runs SET status = ?, current_step = ?, result = ?, error = ?, "
                    "changed_at = COALESCE(?, changed_at), expires_at = ? WHERE id = ?",
                    (
                        update.status,
                        update.current_step,
                        None if update.result is None else compact(update.result),
                        update.error,
                        update.at,
                        self._expiry(update),
                        run_id,
                    ),
                )
            if entries:
                self._insert_entries(db, run_id, entries)
            for key, value in sets.items():
                db.execute(
                    "INSERT INTO run_values SELECT ?, ?, ?, ?, created_at FROM runs WHERE id = ? "
                    "ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value, num = excluded.num",
                    (run_id, key, compact(value), _num(value), run_id),
                )
            for e in consumes:
                db.execute(
                    "UPDATE signals SET state = 'consumed', consumed_seq = ? WHERE id = ?",
                    (e.seq, e.data["signal_id"]),
                )
            if update is not None and update.status != Status.RUNNING:
                db.execute("DELETE FROM leases WHERE run_id = ?", (run_id,))
            woken = None if update is None else update.wake
            if woken is not None and db.execute("SELECT 1 FROM runs WHERE id = ?", (woken,)).fetchone():
                self._add_wakeup(db, woken, self.clock.now())
            if update is not None and update.woken:
                self._add_wakeup(db, run_id, self.clock.now())
            ended = update is not None and update.status in ENDED
            if update is not None and (ended or update.status == Status.FAILED):
                # The end frees the run's slots in this same write: no crash can leak them.
                admitted = sqlite_flow.release(db, run_id, self._wake_admitted)
            if ended:
                db.execute(
                    "UPDATE signals SET state = 'set_aside' WHERE run_id = ? AND state = 'pending'",
                    (run_id,),
                )
            if ended or (timer is not None and timer.due_ms is None):
                db.execute("DELETE FROM timers WHERE run_id = ?", (run_id,))
            elif timer is not None:
                db.execute(
                    "INSERT INTO timers VALUES (?, ?) "
                    "ON CONFLICT (run_id) DO UPDATE SET due_ms = excluded.due_ms",
                    (run_id, timer.due_ms),
                )
        self._tell_admitted(admitted)

    # --- retention ----------------------------------------------------------------------

    retention_s: float | None = None

    def _expiry(self, update: RunUpdate) -> float | None:
        if update.status not in ENDED or self.retention_s is None:
            return None
        return self.clock.now() + self.retention_s

    def expire(self, now: float, limit: int = 100) -> list[str]:
        gone: list[str] = []
        admitted: list[str] = []

        def kept(db: sqlite3.Connection, run_id: str, parent_id: str | None) -> bool:
            parent = (
                None
                if parent_id is None
                else db.execute("SELECT status FROM runs WHERE id = ?", (parent_id,)).fetchone()
            )
            return bool(
                (parent is not None and parent[0] not in ENDED)
                or db.execute("SELECT 1 FROM cancels WHERE run_id = ?", (run_id,)).fetchone()
                or db.execute("SELECT 1 FROM runs WHERE parent_id = ? LIMIT 1", (run_id,)).fetchone()
            )

        with self._write() as db:
            due = db.execute(
                "SELECT id, parent_id FROM runs WHERE expires_at <= ? ORDER BY expires_at, id LIMIT ?",
                (now, limit),
            ).fetchall()
            # Passes until one deletes nothing: a parent due with its children goes in the
            # pass after theirs. What is left is put off.
            while due:
                held = [(r, p) for r, p in due if kept(db, r, p)]
                held_ids = {r for r, _ in held}
                for run_id in [r for r, _ in due if r not in held_ids]:
                    for table in _RUN_TABLES:
                        db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
                    admitted += sqlite_flow.release(db, run_id, self._wake_admitted)
                    db.execute("DELETE FROM runs WHERE id = ?", (run_id,))
                    gone.append(run_id)
                if len(held) == len(due):
                    break
                due = held
            for run_id, _ in due:
                db.execute("UPDATE runs SET expires_at = ? WHERE id = ?", (now + EXPIRY_PUT_OFF_S, run_id))
        self._tell_admitted(admitted)
        return gone

    # --- flow control (runtime.store.sqlite_flow) --------------------------------------

    # Called with each run a freed slot admitted, after the write that recorded its wake-up
    # (``runtime.engine.wake.Wakes`` sets it: locally a no-op, the dispatcher reads wake-ups).
    on_admit: Any = None

    def _wake_admitted(self, db: sqlite3.Connection, run_id: str) -> None:
        self._add_wakeup(db, run_id, self.clock.now())

    def _tell_admitted(self, admitted: list[str]) -> None:
        if self.on_admit is not None:
            for run_id in admitted:
                self.on_admit(run_id)

    def admit(self, run_id: str, wants: Sequence[SlotWant], rank: int) -> Admission:
        with self._write() as db:
            return sqlite_flow.admit(db, run_id, wants, rank)

    def release_slots(self, run_id: str) -> list[str]:
        with self._write() as db:
            admitted = sqlite_flow.release(db, run_id, self._wake_admitted)
        self._tell_admitted(admitted)
        return admitted

    def waiting_for(self, run_id: str) -> Admission | None:
        with self._reader() as db:
            return sqlite_flow.waiting_for(db, run_id)

    def reserve_rate(self, rate: Rate, now_ms: int) -> int:
        with self._write() as db:
            return sqlite_flow.reserve_rate(db, rate, now_ms)

    def set_flow_setting(self, name: str, value: str | None) -> list[str]:
        with self._write() as db:
            admitted = sqlite_flow.set_setting(db, name, value, self._wake_admitted)
        self._tell_admitted(admitted)
        return admitted

    def flow_settings(self) -> dict[str, str]:
        with self._reader() as db:
            return sqlite_flow.settings(db)

    def slot_views(self, limit: int = 100) -> list[SlotView]:
        with self._reader() as db:
            return sqlite_flow.views(db, limit)

    # --- signals -----------------------------------------------------------------------

    def add_signal(
        self,
        run_id: str,
        name: str,
        payload: Any,
        at: float,
        max_backlog: int | None = None,
        *,
        workflow: str | None = None,
    ) -> tuple[int, bool]:
        with self._write() as db:
            row = db.execute("SELECT status, workflow FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None or (workflow is not None and row[1] != workflow):
                raise NoSuchRun(run_id, workflow)
            live = row[0] not in ENDED
            if live and max_backlog is not None:
                # Counted inside this BEGIN IMMEDIATE: no sender, in this process or another,
                # inserts between the count and the insert.
                (pending,) = db.execute(
                    "SELECT COUNT(*) FROM signals WHERE run_id = ? AND state = 'pending'", (run_id,)
                ).fetchone()
                if pending >= max_backlog:
                    raise SignalBacklogFull(run_id, max_backlog)
            cur = db.execute(
                "INSERT INTO signals (run_id, name, payload, at, state) VALUES (?,?,?,?,?)",
                (run_id, name, compact(payload), at, "pending" if live else "set_aside"),
            )
            if live:
                self._add_wakeup(db, run_id, at)
            return int(cur.lastrowid or 0), live

    def signal_backlog(self, run_id: str) -> int:
        rows = self._read("SELECT COUNT(*) FROM signals WHERE run_id = ? AND state = 'pending'", (run_id,))
        return int(rows[0][0])

    def pending_signals(self, run_id: str) -> list[Signal]:
        rows = self._read(_PENDING_SIGNALS, (run_id,))
        return [Signal(r[0], r[1], json.loads(r[2]), r[3]) for r in rows]

    def signals(self, run_id: str) -> list[SignalRecord]:
        rows = self._read(
            "SELECT id, run_id, name, payload, at, state, consumed_seq FROM signals "
            "WHERE run_id = ? ORDER BY id",
            (run_id,),
        )
        return [SignalRecord(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5], r[6]) for r in rows]

    # --- timers and wake-ups -----------------------------------------------------------

    def fire_due_timers(self, now_ms: int) -> list[str]:
        with self._write() as db:
            rows = db.execute(
                "SELECT run_id FROM timers WHERE due_ms <= ? ORDER BY due_ms, run_id", (now_ms,)
            ).fetchall()
            for (run_id,) in rows:
                self._add_wakeup(db, run_id, now_ms / 1000)
                db.execute("DELETE FROM timers WHERE run_id = ?", (run_id,))
        return [r[0] for r in rows]

    def next_due(self) -> int | None:
        rows = self._read("SELECT MIN(due_ms) FROM timers")
        return None if rows[0][0] is None else int(rows[0][0])

    def timer(self, run_id: str) -> int | None:
        rows = self._read("SELECT due_ms FROM timers WHERE run_id = ?", (run_id,))
        return int(rows[0][0]) if rows else None

    def _add_wakeup(self, db: sqlite3.Connection, run_id: str, at: float) -> None:
        # A new token per wake, so a worker clearing an older wake-up leaves this one. The
        # time is the first wake's: a wake-up waiting on is as old as the earliest ask.
        db.execute("UPDATE wake_tokens SET last = last + 1")
        db.execute(
            "INSERT INTO wakeups VALUES (?, (SELECT last FROM wake_tokens), ?) "
            "ON CONFLICT (run_id) DO UPDATE SET token = excluded.token",
            (run_id, at),
        )

    def add_wakeup(self, run_id: str) -> None:
        with self._write() as db:
            if db.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is not None:
                self._add_wakeup(db, run_id, self.clock.now())

    def wakeups(self) -> list[tuple[str, int]]:
        return [(r[0], int(r[1])) for r in self._read("SELECT run_id, token FROM wakeups ORDER BY rowid")]

    def clear_wakeup(self, run_id: str, token: int) -> None:
        with self._write() as db:
            db.execute("DELETE FROM wakeups WHERE run_id = ? AND token = ?", (run_id, token))

    def wakeups_older_than(self, at: float) -> list[str]:
        return [r[0] for r in self._read("SELECT run_id FROM wakeups WHERE at < ? ORDER BY at", (at,))]

    def drop_entries(self, run_id: str, before: int) -> None:
        with self._write() as db:
            db.execute("DELETE FROM journal WHERE run_id = ? AND seq >= 2 AND seq < ?", (run_id, before))

    def progress(self, run_id: str) -> Progress:
        woken = self._read("SELECT at FROM wakeups WHERE run_id = ?", (run_id,))
        leased = self._read("SELECT owner, until_ms FROM leases WHERE run_id = ?", (run_id,))
        return Progress(
            wakeup_at=float(woken[0][0]) if woken else None,
            lease_owner=str(leased[0][0]) if leased else None,
            lease_until_ms=int(leased[0][1]) if leased else None,
        )

    def running_runs(self) -> list[str]:
        return [r[0] for r in self._read("SELECT id FROM runs WHERE status = 'running' ORDER BY created_at")]

    def stale_running(self, before: float, now_ms: int) -> list[str]:
        rows = self._read(
            f"SELECT r.id FROM (SELECT * FROM runs WHERE status = 'running') r {_LAST_ENTRY} "
            "LEFT JOIN leases l ON l.run_id = r.id LEFT JOIN owners o ON o.owner = l.owner "
            "WHERE j.at < ? AND (l.run_id IS NULL OR l.until_ms < ? OR o.beat_ms < ?) "
            "ORDER BY r.created_at",
            (before, now_ms, now_ms - OWNER_DEAD_AFTER_MS),
        )
        return [r[0] for r in rows]

    # --- leases: one process advances a run at a time ---------------------------------
    # Several `lunaflow dev` processes may share a data folder. A run is advanced under a
    # lease whose owner proves it is alive with a heartbeat; a lease of an owner whose
    # heartbeat stopped (a SIGKILL) is free, so a restarted server continues at once.

    def heartbeat(self, owner: str, now_ms: int) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO owners VALUES (?, ?) ON CONFLICT (owner) DO UPDATE SET beat_ms = excluded.beat_ms",  # noqa: E501
                (owner, now_ms),
            )

    def acquire_lease(self, run_id: str, owner: str, now_ms: int, lease_ms: int) -> Lease:
        with self._write() as db:
            if db.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                return Lease.MISSING
            row = db.execute(
                "SELECT l.owner, l.until_ms, o.beat_ms FROM leases l LEFT JOIN owners o ON o.owner = l.owner "
                "WHERE l.run_id = ?",
                (run_id,),
            ).fetchone()
            if row is not None and row[0] != owner:
                holder_dead = row[2] is not None and row[2] < now_ms - OWNER_DEAD_AFTER_MS
                if not holder_dead and row[1] >= now_ms:
                    return Lease.BUSY
            db.execute(
                "INSERT INTO leases VALUES (?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
                "owner = excluded.owner, until_ms = excluded.until_ms",
                (run_id, owner, now_ms + lease_ms),
            )
            return Lease.OK

    def release_lease(self, run_id: str, owner: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM leases WHERE run_id = ? AND owner = ?", (run_id, owner))

    # --- secrets -----------------------------------------------------------------------

    def add_secret(self, name: str, value: str) -> int:
        with self._write() as db:
            row = db.execute("SELECT MAX(version) FROM secrets WHERE name = ?", (name,)).fetchone()
            version = (row[0] or 0) + 1
            db.execute("INSERT INTO secrets VALUES (?,?,?)", (name, version, value))
            return int(version)

    def secret(self, name: str, version: int | None = None) -> tuple[int, str] | None:
        if version is None:
            rows = self._read(
                "SELECT version, value FROM secrets WHERE name = ? ORDER BY version DESC LIMIT 1", (name,)
            )
        else:
            rows = self._read(
                "SELECT version, value FROM secrets WHERE name = ? AND version = ?", (name, version)
            )
        return (int(rows[0][0]), rows[0][1]) if rows else None

    def pin_secret(self, run_id: str, name: str, version: int) -> int:
        with self._write() as db:
            db.execute("INSERT OR IGNORE INTO secret_pins VALUES (?,?,?)", (run_id, name, version))
            row = db.execute(
                "SELECT version FROM secret_pins WHERE run_id = ? AND name = ?", (run_id, name)
            ).fetchone()
            return int(row[0])

    def pinned_secret(self, run_id: str, name: str) -> int | None:
        rows = self._read("SELECT version FROM secret_pins WHERE run_id = ? AND name = ?", (run_id, name))
        return int(rows[0][0]) if rows else None

    # --- what another process did (lunaflow dev's terminal) ---------------------------

    def status_count(self, status: str) -> int:
        """How many runs have ``status``: kept in ``run_counts``, cheap to poll."""
        rows = self._read("SELECT SUM(n) FROM run_counts WHERE status = ?", (status,))
        return int(rows[0][0] or 0)

    def newest_created(self) -> float:
        """The start time of the newest run by start (-inf with no run), where a look with
        ``created_after`` begins."""
        rows = self._read("SELECT created_at FROM runs ORDER BY created_at DESC LIMIT 1", ())
        return float(rows[0][0]) if rows else float("-inf")

    def created_after(self, cursor: tuple[float, str], limit: int = 1000) -> list[tuple[str, str, float]]:
        """(id, workflow, created_at) of the runs started after ``cursor`` (by start, then
        id), oldest first: the runs_by_created index, so a poll is cheap at any count."""
        at, rid = cursor
        return [
            (str(r[0]), str(r[1]), float(r[2]))
            for r in self._read(
                "SELECT id, workflow, created_at FROM runs WHERE created_at >= ? "
                "AND NOT (created_at = ? AND id <= ?) ORDER BY created_at, id LIMIT ?",
                (at, at, rid, limit),
            )
        ]

    def ids_with_status(self, status: str) -> list[tuple[str, str]]:
        """(run id, workflow) of every run with ``status``."""
        return [(r[0], r[1]) for r in self._read("SELECT id, workflow FROM runs WHERE status = ?", (status,))]

    def close(self) -> None:
        with self._readers_lock:
            self._closed = True
            idle, self._readers = self._readers, []
        for db in idle:
            db.close()
        with self._lock:
            self._db.close()
            if self._copy is not None:
                shutil.rmtree(self._copy, ignore_errors=True)
                self._copy = None

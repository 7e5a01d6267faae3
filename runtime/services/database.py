"""``database "name"``: one SQLite file per database, with migrations applied once, in order.

Migrations are ``migrations/<db>/NNN_name.sql`` files in the project. Each runs in its own
transaction and is recorded in ``_lunaflow_migrations``; a failing one is rolled back and
reported with its file and the SQL error.

Writes go through one connection, one at a time. ``query`` and ``first`` read through
read-only connections of their own, one per read running at once (WAL lets readers run
beside the writer), so a long query in one step does not hold up a route reading the same
database; a read-only connection refuses writes, which then take the writer. Every
connection has the authorizer (no ATTACH, no pragmas that change settings) and a progress
handler that interrupts a statement once the step attempt running it is past its deadline
(``runtime.services.deadline``).
"""

from __future__ import annotations

import queue
import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runtime.services import deadline
from runtime.services.base import ServiceError

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_MIGRATION = re.compile(r"^(\d+)_.*\.sql$")


class Database:
    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.path = path
        self._lock = threading.RLock()  # the writer, one statement at a time
        self._db = self._connect(read_only=False)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS _lunaflow_migrations (file TEXT PRIMARY KEY, applied_at TEXT)"
        )
        self._db.set_authorizer(_authorize)
        # Idle read-only connections: a read takes one (or opens one) and puts it back, so
        # there are as many as reads ever ran at once, whatever threads come and go.
        self._readers: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self._all_readers: list[sqlite3.Connection] = []
        self._guard = threading.Lock()

    def _connect(self, *, read_only: bool) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False, timeout=30.0)
        conn.row_factory = sqlite3.Row
        if read_only:
            conn.execute("PRAGMA query_only=ON")  # a write fails before it changes anything
        else:
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.set_progress_handler(deadline.sqlite_progress, deadline.SQLITE_PROGRESS_STEPS)
        if read_only:
            # User SQL stays inside its own database file: no ATTACH (which VACUUM INTO uses
            # too), no pragmas that name files or change settings.
            conn.set_authorizer(_authorize)
        return conn

    @contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = self._readers.get_nowait()
        except queue.Empty:
            conn = self._connect(read_only=True)
            with self._guard:
                self._all_readers.append(conn)
        try:
            yield conn
        finally:
            self._readers.put(conn)

    def migrate(self, folder: Path) -> list[str]:
        """Apply the folder's migrations not applied yet; returns the files applied."""
        if not folder.is_dir():
            raise ServiceError(
                f"database '{self.name}': migrations folder {folder} does not exist; create it with files "
                f"like 001_init.sql, or point migrations = at the right folder"
            )
        files = sorted(
            (p for p in folder.iterdir() if _MIGRATION.match(p.name)), key=lambda p: (_number(p.name), p.name)
        )
        applied: list[str] = []
        with self._lock:
            done = {r[0] for r in self._db.execute("SELECT file FROM _lunaflow_migrations")}
            for path in files:
                if path.name in done:
                    continue
                sql = path.read_text(encoding="utf-8")
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                    for statement in _statements(sql):
                        self._db.execute(statement)
                    self._db.execute(
                        "INSERT INTO _lunaflow_migrations VALUES (?, datetime('now'))", (path.name,)
                    )
                    self._db.execute("COMMIT")
                except sqlite3.Error as e:
                    self._db.execute("ROLLBACK")
                    raise ServiceError(
                        f"database '{self.name}': migration {path.name} failed and was rolled back: {e}; "
                        "fix the file and start again (applied migrations are not re-run)"
                    ) from e
                applied.append(path.name)
        return applied

    def call(self, method: str, args: list[Any]) -> list[Any]:
        if method not in ("exec", "query", "first"):
            raise ServiceError(f"database '{self.name}' has no method '{method}'; use exec, query or first")
        if not args or not isinstance(args[0], str):
            raise ServiceError(f"database '{self.name}':{method} expects SQL text as its first argument")
        sql = args[0]
        params = args[1] if len(args) > 1 and args[1] is not None else []
        if not isinstance(params, list | dict):
            raise ServiceError(
                f"database '{self.name}':{method}: parameters must be an array for ? placeholders "
                "(or a table for :name placeholders)"
            )
        try:
            # A read beside an open transaction of the writer (BEGIN ... in earlier calls)
            # goes through the writer, to see what the transaction wrote.
            if method != "exec" and not self._db.in_transaction:
                try:
                    with self._reader() as reader:
                        return self._run(reader, method, sql, params)
                except sqlite3.OperationalError as e:
                    if "readonly" not in str(e):
                        raise  # anything but a write (INSERT ... RETURNING) through query
            with self._lock:
                return self._run(self._db, method, sql, params)
        except sqlite3.Error as e:
            limit = deadline.current()
            if limit is not None and limit.passed():
                raise limit.expired() from e
            raise ServiceError(f"database '{self.name}':{method} failed: {e} (SQL: {_clip(sql)})") from e

    def _run(self, conn: sqlite3.Connection, method: str, sql: str, params: Any) -> list[Any]:
        cur = conn.execute(sql, params)
        if method == "exec":
            return [{"changes": cur.rowcount if cur.rowcount >= 0 else 0, "last_insert_id": cur.lastrowid}]
        if method == "first":
            row = cur.fetchone()
            return [None if row is None else _row(self.name, row)]
        return [[_row(self.name, r) for r in cur.fetchall()]]

    def close(self) -> None:
        with self._lock:
            self._db.close()
        with self._guard:
            for conn in self._all_readers:
                conn.close()
            self._all_readers.clear()


_READ_PRAGMAS = {"table_info", "table_xinfo", "index_list", "index_info", "foreign_key_list", "user_version"}


def _authorize(
    action: int, arg1: str | None, arg2: str | None, db_name: str | None, source: str | None
) -> int:
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA and (arg1 not in _READ_PRAGMAS or arg2 is not None):
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _row(db: str, row: sqlite3.Row) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in row.keys():  # noqa: SIM118 - sqlite3.Row iterates values, not keys
        value = row[key]
        if isinstance(value, bytes):
            raise ServiceError(
                f"database '{db}': column '{key}' holds a BLOB; lunaflow returns text, numbers and NULL — "
                "store binary data hex- or base64-encoded"
            )
        out[key] = value
    return out


def _number(name: str) -> int:
    match = _MIGRATION.match(name)
    return int(match.group(1)) if match else 0


def _clip(sql: str) -> str:
    sql = " ".join(sql.split())
    return sql if len(sql) <= 120 else sql[:117] + "..."


def _statements(sql: str) -> list[str]:
    """Split a migration into statements, using sqlite3's own completeness check."""
    out, current = [], ""
    for line in sql.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                out.append(current)
            current = ""
    if current.strip():
        out.append(current)
    return out


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ServiceError(
            f"database name '{name}' is not allowed; use 1-64 letters, digits, '-' or '_' (it names a file)"
        )
    return name

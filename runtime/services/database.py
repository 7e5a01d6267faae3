"""``database "name"``: one SQLite file per database, with migrations applied once, in order.

Migrations are ``migrations/<db>/NNN_name.sql`` files in the project, split into statements
as sqlite3's shell splits them. The ones not applied yet apply together in one transaction,
each recorded in ``_lunaflow_migrations``; if one fails, all of them are rolled back and it
is reported with its file and the SQL error. They apply only once the code that declared
them is accepted (``Platform``), never for a read-only load (``lunaflow check``).

Writes go through one connection, one at a time. ``query`` and ``first`` read through
read-only connections of their own, one per read running at once (WAL lets readers run
beside the writer), so a long query in one step does not hold up a route reading the same
database; a read-only connection refuses writes, which then take the writer. Every
connection has the authorizer (no ATTACH, no pragmas that change settings) and a progress
handler that interrupts a statement once the step attempt running it is past its deadline
(``runtime.services.deadline``).
"""

from __future__ import annotations

import json
import queue
import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runtime.services import deadline
from runtime.services import sql as sql_api
from runtime.services.base import ServiceError

# Aurora PostgreSQL's DatabaseName, as the prelude holds it where a database is declared;
# checked again here because the name also names a file or a database of the local server.
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,62}$")
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
        # Declared types parse BOOLEAN columns into booleans (the converters below).
        conn = sqlite3.connect(
            str(self.path),
            isolation_level=None,
            check_same_thread=False,
            timeout=30.0,
            detect_types=sqlite3.PARSE_DECLTYPES,
        )
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
        """Apply the folder's migrations not applied yet; returns the files applied.

        They apply together, in one transaction: each file's statements and its ledger row,
        then one commit. If one fails, none of them is kept, so the code that declared them
        is refused on the schema the old code had."""
        files = migration_files(self.name, folder)
        applied: list[str] = []
        with self._lock:
            done = {r[0] for r in self._db.execute("SELECT file FROM _lunaflow_migrations")}
            pending = [p for p in files if p.name not in done]
            if not pending:
                return applied
            self._db.execute("BEGIN IMMEDIATE")
            for path in pending:
                sql = path.read_text(encoding="utf-8")
                try:
                    for statement in statements(sql):
                        self._db.execute(statement)
                    self._db.execute(
                        "INSERT INTO _lunaflow_migrations VALUES (?, datetime('now'))", (path.name,)
                    )
                except sqlite3.Error as e:
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
                    also = (
                        f" with {', '.join(applied)}, applied before it in one transaction" if applied else ""
                    )
                    raise ServiceError(
                        f"database '{self.name}': migration {path.name} failed and was rolled back{also}: "
                        f"{e}; fix the file and load the project again (applied migrations are not re-run)"
                    ) from e
                applied.append(path.name)
            self._db.execute("COMMIT")
        return applied

    def call(self, method: str, args: list[Any]) -> list[Any]:
        """One Lua call (runtime.services.sql checks, binds and converts; this runs it)."""
        try:
            return sql_api.call(self.name, self, method, args)
        except sqlite3.Error as e:
            limit = deadline.current()
            if limit is not None and limit.passed():
                raise limit.expired() from e
            text = args[0] if args and isinstance(args[0], str) else ""
            raise ServiceError(
                f"database '{self.name}':{method} failed: {e} (SQL: {sql_api.clip(text)})"
            ) from e

    # The executor seam (runtime.services.sql.Executor).
    def placeholder(self, n: int) -> str:
        return "?"

    def execute(self, method: str, sql: str, values: list[Any]) -> tuple[int, list[dict[str, Any]] | None]:
        params = [_param(v) for v in values]
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

    @staticmethod
    def _run(
        conn: sqlite3.Connection, method: str, sql: str, params: list[Any]
    ) -> tuple[int, list[dict[str, Any]] | None]:
        cur = conn.execute(sql, params)
        if method == "exec":
            return (cur.rowcount if cur.rowcount >= 0 else 0), None
        columns = [c[0] for c in cur.description or []]
        rows = cur.fetchmany(1) if method == "first" else cur.fetchall()
        cur.close()
        return 0, [dict(zip(columns, tuple(r), strict=True)) for r in rows]

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


def _number(name: str) -> int:
    match = _MIGRATION.match(name)
    return int(match.group(1)) if match else 0


def _param(value: Any) -> Any:
    """A bound value for SQLite: a Lua table as its JSON text (as the Data API's JSON type
    hint sends it); booleans go in as 1 and 0 (SQLite has no boolean type)."""
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return value


def _boolean(raw: bytes) -> Any:
    """A BOOLEAN (or BOOL) column reads as a boolean, as on PostgreSQL; a value that is not
    0 or 1 is left as SQLite stored it."""
    text = raw.decode("utf-8", "replace")
    return {"1": True, "0": False}.get(text, int(text) if text.lstrip("-").isdigit() else text)


sqlite3.register_converter("BOOLEAN", _boolean)
sqlite3.register_converter("BOOL", _boolean)
# Python 3.11's default DATE and TIMESTAMP converters would turn a column's text into
# datetimes (and fail on text they cannot parse): those columns read as the text stored.
sqlite3.register_converter("DATE", lambda raw: raw.decode("utf-8", "replace"))
sqlite3.register_converter("TIMESTAMP", lambda raw: raw.decode("utf-8", "replace"))


def statements(sql: str) -> list[str]:
    """Split a migration into statements as sqlite3's shell does: at each semicolon that
    ends a complete statement by SQLite's own check (``sqlite3.complete_statement``), so
    semicolons inside strings, comments and trigger bodies stay where they are, and several
    statements may share a line."""
    out: list[str] = []
    start = 0
    at = sql.find(";")
    while at != -1:
        if sqlite3.complete_statement(sql[start : at + 1]):
            piece = sql[start : at + 1]
            if _has_sql(piece):
                out.append(piece)
            start = at + 1
        at = sql.find(";", at + 1)
    if _has_sql(sql[start:]):
        out.append(sql[start:])  # an unfinished last statement: executing it says what is wrong
    return out


def _has_sql(piece: str) -> bool:
    """Whether a piece holds more than whitespace, comments and semicolons."""
    text = re.sub(r"--[^\n]*|/\*.*?(\*/|$)", " ", piece, flags=re.S)
    return bool(text.replace(";", " ").strip())


def migration_files(name: str, folder: Path) -> list[Path]:
    """A database's migration files, in the order they apply."""
    if not folder.is_dir():
        raise ServiceError(
            f"database '{name}': migrations folder {folder} does not exist; create it with files "
            f"like 001_init.sql, or point migrations = at the right folder"
        )
    files = (p for p in folder.iterdir() if _MIGRATION.match(p.name))
    return sorted(files, key=lambda p: (_number(p.name), p.name))


def applied_migrations(path: Path) -> set[str]:
    """The migrations recorded in a database file, read without writing (none if the file or
    its ledger does not exist yet)."""
    if not path.is_file():
        return set()
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=30.0)
    try:
        conn.execute("PRAGMA query_only=ON")
        known = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_lunaflow_migrations'"
        ).fetchone()
        if known is None:
            return set()
        return {r[0] for r in conn.execute("SELECT file FROM _lunaflow_migrations")}
    finally:
        conn.close()


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ServiceError(
            f"database name '{name}' is not allowed: on AWS it is Aurora PostgreSQL's DatabaseName, "
            "1-63 letters, digits or underscores starting with a letter; rename the database"
        )
    return name

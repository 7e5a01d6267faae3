"""``database "name"`` on PostgreSQL: the local server or one named by LUNAFLOW_DATABASE_URL.

The Lua API is ``runtime.services.sql``'s, over this executor: placeholders render as
PostgreSQL's own ``$1, $2, ...``, and values are bound with the RDS Data API's types, so SQL
that Aurora refuses is refused here too: a string is ``character varying`` (not an untyped
literal PostgreSQL would coerce: a string into a TIMESTAMP column needs a cast), an integer
``bigint``, a number ``double precision``, a boolean ``boolean``, a Lua table ``json`` (the
Data API's ``typeHint = JSON``), nil NULL. Rows convert in ``runtime.services.sql.row``:
NUMERIC as numbers (the Data API's ``DOUBLE_OR_LONG``), times and dates as text.

Each call runs on a pooled connection in autocommit, as each Data API ``ExecuteStatement``
outside a transaction commits on its own. A step's deadline becomes the statement's
``statement_timeout``. Migrations apply together in one transaction (DDL is transactional
on PostgreSQL), under an advisory lock, so two processes loading the same code apply each
file once, and a failure keeps none of them.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import pq
from psycopg.types.json import Json
from psycopg.types.numeric import Int8Dumper
from psycopg.types.string import StrDumper

from runtime.services import deadline, pgserver
from runtime.services import sql as sql_api
from runtime.services.base import ServiceError
from runtime.services.database import migration_files

LEDGER = "CREATE TABLE IF NOT EXISTS _lunaflow_migrations (file TEXT PRIMARY KEY, applied_at TEXT)"
_MIGRATION_LOCK = 0x6C756E61  # "luna": one advisory lock key per database for its migrations


class _Varchar(StrDumper):
    """A string bound as ``character varying``, as the Data API binds a ``stringValue``."""

    oid = psycopg.adapters.types["varchar"].oid


def typed(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """A connection that binds values with the Data API's types."""
    conn.adapters.register_dumper(str, _Varchar)
    conn.adapters.register_dumper(int, Int8Dumper)
    return conn


def value(v: Any) -> Any:
    """A bound value: a Lua table as JSON (an array would otherwise bind as a PostgreSQL
    array)."""
    return Json(v) if isinstance(v, dict | list) else v


def message(e: psycopg.Error) -> str:
    diag = getattr(e, "diag", None)
    primary = diag.message_primary if diag is not None else None
    return primary or str(e).strip().splitlines()[0]


class PgDatabase:
    def __init__(self, name: str, server: pgserver.Server) -> None:
        self.name = name
        self._server = server
        server.create(name)
        self._conninfo = server.conninfo(name)
        self._idle: queue.SimpleQueue[psycopg.Connection[Any]] = queue.SimpleQueue()
        self._all: list[psycopg.Connection[Any]] = []
        self._guard = threading.Lock()
        self._timeouts: dict[int, bool] = {}  # id(conn) -> a statement_timeout is set on it

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conn = typed(psycopg.connect(self._conninfo, autocommit=True))
        except psycopg.Error as e:
            raise ServiceError(f"database '{self.name}': cannot connect to PostgreSQL: {message(e)}") from e
        with self._guard:
            self._all.append(conn)
        return conn

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            conn = self._idle.get_nowait()
        except queue.Empty:
            conn = self._connect()
        try:
            yield conn
        finally:
            if conn.closed or conn.broken:
                with self._guard:
                    if conn in self._all:
                        self._all.remove(conn)
            else:
                if conn.info.transaction_status != pq.TransactionStatus.IDLE:
                    conn.rollback()
                self._idle.put(conn)

    def migrate(self, folder: Path) -> list[str]:
        """Apply the folder's migrations not applied yet, together; returns the files applied."""
        files = migration_files(self.name, folder)
        applied: list[str] = []
        with self._conn() as conn:
            try:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                    conn.execute(LEDGER)
                    done = {r[0] for r in conn.execute("SELECT file FROM _lunaflow_migrations")}
                    for path in files:
                        if path.name in done:
                            continue
                        try:
                            # The whole file at once: PostgreSQL splits it, dollar quotes and all.
                            conn.execute(path.read_text(encoding="utf-8").encode())
                            conn.execute(
                                "INSERT INTO _lunaflow_migrations VALUES (%s, now()::text)", (path.name,)
                            )
                        except psycopg.Error as e:
                            also = (
                                f" with {', '.join(applied)}, applied before it in one transaction"
                                if applied
                                else ""
                            )
                            raise ServiceError(
                                f"database '{self.name}': migration {path.name} failed and was rolled back"
                                f"{also}: {message(e)}; fix the file and load the project again "
                                "(applied migrations are not re-run)"
                            ) from e
                        applied.append(path.name)
            except psycopg.Error as e:
                raise ServiceError(f"database '{self.name}': migrations could not run: {message(e)}") from e
        return applied

    def call(self, method: str, args: list[Any]) -> list[Any]:
        """One Lua call (runtime.services.sql checks, binds and converts; this runs it)."""
        try:
            return sql_api.call(self.name, self, method, args)
        except psycopg.Error as e:
            limit = deadline.current()
            if limit is not None and (limit.passed() or isinstance(e, psycopg.errors.QueryCanceled)):
                raise limit.expired() from e
            text = args[0] if args and isinstance(args[0], str) else ""
            raise ServiceError(
                f"database '{self.name}':{method} failed: {message(e)} (SQL: {sql_api.clip(text)})"
            ) from e

    # The executor seam (runtime.services.sql.Executor).
    def placeholder(self, n: int) -> str:
        return f"${n}"

    def execute(self, method: str, sql: str, values: list[Any]) -> tuple[int, list[dict[str, Any]] | None]:
        with self._conn() as conn:
            limit = deadline.current()
            if limit is not None:
                left_ms = max(1, int(limit.left() * 1000))
                conn.execute(f"SET statement_timeout = {left_ms}")
                self._timeouts[id(conn)] = True
            elif self._timeouts.pop(id(conn), False):
                conn.execute("SET statement_timeout = 0")
            cur = psycopg.RawCursor(conn)
            cur.execute(sql.encode(), [value(v) for v in values])
            if conn.info.transaction_status != pq.TransactionStatus.IDLE:
                conn.rollback()
                raise ServiceError(
                    f"database '{self.name}':{method}: a transaction was left open; each call commits "
                    "on its own, as the Data API's statements do: put BEGIN ... COMMIT work in one "
                    "migration, or make it one statement (INSERT ... ON CONFLICT, UPDATE ... RETURNING)"
                )
            if method == "exec" or cur.description is None:
                return max(cur.rowcount, 0), None if method == "exec" else []
            columns = [d.name for d in cur.description]
            rows = cur.fetchmany(1) if method == "first" else cur.fetchall()
            return 0, [dict(zip(columns, r, strict=True)) for r in rows]

    def close(self) -> None:
        with self._guard:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()


def applied_migrations(data_dir: Path, name: str) -> set[str]:
    """The migrations recorded in a database, read without writing: none if the cluster,
    the database or its ledger does not exist yet (``lunaflow check``)."""

    if not pgserver.has_cluster(data_dir):
        return set()
    server = pgserver.acquire(data_dir)
    try:
        with psycopg.connect(server.conninfo("postgres", admin=True), autocommit=True) as admin:
            found = admin.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (server.physical(name),)
            ).fetchone()
        if found is None:
            return set()
        with psycopg.connect(server.conninfo(name), autocommit=True) as conn:
            conn.execute("SET default_transaction_read_only = on")
            known = conn.execute("SELECT to_regclass('_lunaflow_migrations')").fetchone()
            if known is None or known[0] is None:
                return set()
            return {r[0] for r in conn.execute("SELECT file FROM _lunaflow_migrations")}
    finally:
        pgserver.release(server)

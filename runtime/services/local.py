"""``LocalServices``: every service of SPEC section 2 under the data folder.

A project's databases are databases of a PostgreSQL server (``pgserver``: the dialect Aurora
runs, by default) or, with ``LUNAFLOW_DATABASES=sqlite``, ``<data>/db/<name>.sqlite``; kv,
object state and queue messages share ``<data>/services.sqlite``. Each thread gets its own
connections.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.services import builtins, pgserver
from runtime.services import kv as kv_mod
from runtime.services import objects as objects_mod
from runtime.services import queues as queues_mod
from runtime.services.base import Declaration, ObjectRunner, QueueRunner, ServiceError
from runtime.services.database import Database, applied_migrations, check_name, migration_files
from runtime.services.kv import KV
from runtime.services.objects import Objects
from runtime.services.queues import Queues, QueueSettings

if TYPE_CHECKING:
    from runtime.services.postgres import PgDatabase

ENGINE_SETTING = "LUNAFLOW_DATABASES"
DEFAULT_ENGINE = "postgres"


class LocalServices:
    def __init__(
        self,
        data_dir: str | Path,
        now: Callable[[], float],
        queue_settings: Callable[[str], QueueSettings] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._path = self.data_dir / "services.sqlite"
        self._local = threading.local()
        # Each thread's connection, closed when its thread ends (lunaflow dev serves each
        # request on a thread of its own: kept, they would run the process out of files).
        self._all: weakref.WeakSet[_ThreadConnection] = weakref.WeakSet()
        self._guard = threading.Lock()
        self._databases: dict[str, Database | PgDatabase] = {}
        self._pg: pgserver.Server | None = None
        db = self._db()
        db.executescript(kv_mod.SCHEMA + objects_mod.SCHEMA + queues_mod.SCHEMA)
        self.kv = KV(self._db, now)
        self.objects = Objects(self._db)
        self.queues = Queues(self._db, now, queue_settings or (lambda name: QueueSettings()))

    def _db(self) -> sqlite3.Connection:
        held: _ThreadConnection | None = getattr(self._local, "held", None)
        if held is None:
            conn = sqlite3.connect(
                str(self._path), isolation_level=None, check_same_thread=False, timeout=30.0
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            held = self._local.held = _ThreadConnection(conn)
            with self._guard:
                self._all.add(held)
        return held.conn

    def declare(self, kind: str, name: str, opts: Any, project_root: Path) -> None:
        """Open a declared database and apply its pending migrations (the platform calls
        this once the code that declared it is accepted, never for a read-only load)."""
        if kind != "database":
            return
        folder = migrations_folder(name, opts, project_root)
        with self._guard:
            db = self._databases.get(name)
            if db is None:
                if engine() == "postgres":
                    from runtime.services.postgres import PgDatabase  # psycopg only when used

                    if self._pg is None:
                        self._pg = pgserver.acquire(self.data_dir)
                    db = self._databases[name] = PgDatabase(name, self._pg)
                else:
                    place = self.data_dir / "db"
                    place.mkdir(exist_ok=True)
                    db = self._databases[name] = Database(name, place / f"{name}.sqlite")
        if folder is not None:
            db.migrate(folder)

    def database(self, name: str) -> Database | PgDatabase:
        db = self._databases.get(name)
        if db is None:
            raise ServiceError(f"database '{name}' is not declared; declare it at a script's top level")
        return db

    def call(self, kind: str, name: str, method: str, args: list[Any]) -> list[Any]:
        if kind == "database":
            return self.database(name).call(method, args)
        if kind == "kv":
            return self.kv.call(name, method, args)
        if kind == "queue":
            return self.queues.call(name, method, args)
        raise ServiceError(f"no local service of kind '{kind}'")

    def call_object(
        self, runner: ObjectRunner, cls: str, key: str, method: str, args: list[Any]
    ) -> list[Any]:
        return self.objects.call(runner, cls, key, method, args)

    def http(self, spec: dict[str, Any], data: bytes | None) -> dict[str, Any]:
        return builtins.http_request(spec, data)

    def run_due(self, runner: QueueRunner) -> int:
        return self.queues.run_due(runner)

    def next_due(self, runner: QueueRunner) -> float | None:
        return self.queues.next_due(runner)

    def close(self) -> None:
        with self._guard:
            for held in list(self._all):
                held.conn.close()
            self._all.clear()
            for db in self._databases.values():
                db.close()
            self._databases.clear()
            server, self._pg = self._pg, None
        if server is not None:
            pgserver.release(server)
        self._local = threading.local()


def earlier_sqlite_databases(data_dir: str | Path) -> list[Path]:
    """The SQLite files an earlier lunaflow kept a project's databases in (``<data>/db``),
    when databases now run on PostgreSQL: they are not read and never removed."""
    folder = Path(data_dir) / "db"
    if engine() != "postgres" or not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.sqlite") if p.is_file())


def earlier_sqlite_notice(files: Sequence[Path]) -> str:
    """What ``lunaflow dev`` says about ``earlier_sqlite_databases``: what it found, why it
    no longer reads them, and the two ways on."""
    found = ", ".join(f"{p.name} ({_size(p.stat().st_size)})" for p in files)
    first = files[0]
    return (
        f"found {len(files)} SQLite database file(s) from an earlier lunaflow in {first.parent}: {found}. "
        "A project's databases now run on PostgreSQL, the dialect Aurora runs, so these files are "
        "not read; they are kept as they are. To go on with them unchanged, start with "
        f"{ENGINE_SETTING}=sqlite. To move their rows to PostgreSQL, read them with any SQLite tool "
        f"(sqlite3 {first} .dump) and insert them through a migration of the database."
    )


def _size(n: int) -> str:
    return f"{n} bytes" if n < 1024 else f"{n / 1024:.0f} KB" if n < 1024 * 1024 else f"{n / 1048576:.1f} MB"


def engine() -> str:
    """Which server runs a project's databases: ``postgres`` (the dialect Aurora runs) or
    ``sqlite``, from ``LUNAFLOW_DATABASES``; a ``LUNAFLOW_DATABASE_URL`` means postgres."""
    if os.environ.get(pgserver.URL_SETTING):
        return "postgres"
    chosen = os.environ.get(ENGINE_SETTING, DEFAULT_ENGINE).strip().lower() or DEFAULT_ENGINE
    if chosen not in ("postgres", "sqlite"):
        raise ServiceError(
            f"{ENGINE_SETTING}={chosen!r} is not an engine; use postgres (the dialect Aurora runs) or sqlite"
        )
    return chosen


def migrations_folder(name: str, opts: Any, project_root: Path) -> Path | None:
    """The migrations folder a ``database "name" { migrations = ... }`` declaration names,
    checked: inside the project. None when it names none."""
    check_name(name)
    migrations = opts.get("migrations") if isinstance(opts, dict) else None
    if migrations is None:
        return None
    if not isinstance(migrations, str):
        raise ServiceError(f'database "{name}": migrations must be a folder path like "migrations/{name}"')
    root = project_root.resolve()
    path = (root / migrations).resolve()
    if root not in path.parents and path != root:
        raise ServiceError(f'database "{name}": migrations folder {migrations} is outside the project')
    return path


def pending_migrations(
    data_dir: Path, declarations: Sequence[Declaration], project_root: Path, project: str
) -> dict[str, list[str]]:
    """What loading this code would migrate in the data folder: each declared database's
    migration files not applied yet. Reads only (``lunaflow check``); a declaration the
    platform would refuse is refused here with the same error."""
    pending: dict[str, list[str]] = {}
    for d in declarations:
        if d.kind != "database":
            continue
        try:
            folder = migrations_folder(d.name, d.opts, project_root)
            if folder is None:
                continue
            if engine() == "postgres":
                from runtime.services.postgres import applied_migrations as pg_applied_migrations

                done = pg_applied_migrations(data_dir, d.name)
            else:
                done = applied_migrations(data_dir / "db" / f"{d.name}.sqlite")
            files = [p.name for p in migration_files(d.name, folder) if p.name not in done]
        except ServiceError as e:
            raise d.refused(project, e) from e
        if files:
            pending[d.name] = files
    return pending


class _ThreadConnection:
    """A thread's connection, closed with its thread's local data."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __del__(self) -> None:
        self.conn.close()

"""Reading a project's database from a test, whichever engine runs it (issue 25).

``LUNAFLOW_DATABASES`` (``runtime.services.local.engine``) decides: on PostgreSQL (the
default) the data folder's cluster is reached as its superuser, so a test sees the tables
whatever the project granted; on SQLite the file ``<folder>/db/<name>.sqlite`` is opened.
``folder`` is the data folder of a ``LocalPlatform`` or ``lunaflow dev``, or an
``AwsPlatform``'s ``data_dir / "db"`` (where its Data API keeps its cluster).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runtime.services import pgserver
from runtime.services import sql as sql_api
from runtime.services.local import engine


@contextmanager
def held(folder: Path) -> Iterator[None]:
    """The folder's server kept up across several reads: a server that no platform holds is
    started for one read and stopped at its end, and each start or stop takes a fraction of
    a second (``contents`` and ``exists`` read three or more times)."""
    if engine() == "sqlite":
        yield
        return
    server = pgserver.acquire(Path(folder))
    try:
        yield
    finally:
        pgserver.release(server)


def rows(folder: Path, db: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """The rows of one query, with ``?`` placeholders."""
    if engine() == "sqlite":
        path = Path(folder) / "db" / f"{db}.sqlite"
        if not path.exists() and (Path(folder) / f"{db}.sqlite").exists():
            path = Path(folder) / f"{db}.sqlite"  # an AwsPlatform's Data API folder (data_dir / "db")
        conn = sqlite3.connect(path)
        try:
            return [tuple(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()
    import psycopg

    pieces, _ = sql_api.placeholders(sql)
    text = pieces[0] + "".join(f"${i + 1}{p}" for i, p in enumerate(pieces[1:]))
    server = pgserver.acquire(Path(folder))
    try:
        with psycopg.connect(server.conninfo(db, admin=True), autocommit=True) as conn:
            return [tuple(r) for r in psycopg.RawCursor(conn).execute(text.encode(), list(params)).fetchall()]
    finally:
        pgserver.release(server)


def tables(folder: Path, db: str) -> set[str]:
    """The names of a database's tables."""
    if engine() == "sqlite":
        return {r[0] for r in rows(folder, db, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    return {r[0] for r in rows(folder, db, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}


def exists(folder: Path, db: str) -> bool:
    """Whether the database was created at all."""
    if engine() == "sqlite":
        return (Path(folder) / "db" / f"{db}.sqlite").is_file()
    server = pgserver.acquire(Path(folder))
    try:
        found = rows(folder, "postgres", "SELECT 1 FROM pg_database WHERE datname = ?", server.physical(db))
    finally:
        pgserver.release(server)
    return bool(found)


def contents(folder: Path, db: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every table of a database, row by row in a stable order (empty if it does not exist)."""
    with held(folder):
        if not exists(folder, db):
            return {}
        return {
            n: sorted(rows(folder, db, f'SELECT * FROM "{n}"'), key=repr) for n in sorted(tables(folder, db))
        }


def files(folder: Path) -> dict[str, str]:
    """Every file under a data folder and a digest of its bytes, but the PostgreSQL
    cluster's: a server writes its own files (statistics, checkpoints) whenever it runs, so
    its databases are compared by their rows (``contents``)."""
    cluster = Path(folder) / "pg"
    return {
        str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(Path(folder).rglob("*"))
        if f.is_file() and cluster not in f.parents
    }

"""Issue 25, point 5: a data folder made by an earlier lunaflow, whose project databases
were SQLite files (``<data>/db/<name>.sqlite``), is not silently lost now that databases
run on PostgreSQL: ``lunaflow dev`` says what it found and what to do, and keeps the files."""

from __future__ import annotations

import hashlib
import signal
import sqlite3
from pathlib import Path

from tests.support.devserver import DevServer, Reply, Servers

SCRIPT = """
local shop = database "shop" {}
on "fetch" (function(request)
    local ok, r = pcall(function() return shop:first("SELECT count(*) AS n FROM earlier_notes") end)
    local out = ok and { ok = true, value = r } or { ok = false, error = r }
    return { status_code = 200, body = json.encode(out) }
end)
"""


def _project(tmp: Path) -> Path:
    project = tmp / "shop"
    project.mkdir()
    (project / "main.lua").write_text(SCRIPT)
    return project


def _earlier_folder(data: Path) -> Path:
    (data / "db").mkdir(parents=True)
    old = data / "db" / "shop.sqlite"
    conn = sqlite3.connect(old)
    conn.execute("CREATE TABLE earlier_notes (id INTEGER PRIMARY KEY, name TEXT)")
    conn.executemany("INSERT INTO earlier_notes (name) VALUES (?)", [("lamp",), ("desk",)])
    conn.commit()
    conn.close()
    return old


def _count(server: DevServer) -> Reply:
    return server.get("/")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_dev_names_the_earlier_sqlite_databases_says_what_to_do_and_keeps_them(
    tmp_path: Path, servers: Servers
) -> None:
    data = tmp_path / "data"
    old = _earlier_folder(data)
    before = _digest(old)
    server = servers.start(_project(tmp_path), data, env={"LUNAFLOW_DATABASES": "postgres"})
    reply = _count(server).json()
    assert reply["ok"] is False and "earlier_notes" in reply["error"], reply  # not read
    assert server.stop(signal.SIGINT) == 0, server.output_tail()
    said = " ".join(server.output().split())
    assert "found 1 SQLite database file(s) from an earlier lunaflow" in said, said
    assert "shop.sqlite" in said and str(data / "db") in said, said
    assert "LUNAFLOW_DATABASES=sqlite" in said, "the notice does not say how to go on with the files"
    assert f"sqlite3 {old} .dump" in said, "the notice does not say how to read the rows out"
    assert old.exists() and _digest(old) == before, "the earlier database file was changed or removed"
    rows = sqlite3.connect(old).execute("SELECT name FROM earlier_notes ORDER BY id").fetchall()
    assert rows == [("lamp",), ("desk",)]


def test_with_sqlite_chosen_the_earlier_files_are_the_databases_and_nothing_is_said(
    tmp_path: Path, servers: Servers
) -> None:
    data = tmp_path / "data"
    _earlier_folder(data)
    server = servers.start(_project(tmp_path), data, env={"LUNAFLOW_DATABASES": "sqlite"})
    reply = _count(server).json()
    assert reply == {"ok": True, "value": {"n": 2}}, reply
    assert server.stop(signal.SIGINT) == 0, server.output_tail()
    assert "earlier lunaflow" not in server.output(), server.output_tail()

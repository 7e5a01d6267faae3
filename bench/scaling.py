"""lunaflow's own scaling: resume cost against journal length, and parked runs in `lunaflow dev`.

    python3 bench/scaling.py [--dir DIR] [--lengths 100,1000,2000,5000,10000,20000] [--trials 3]
                             [--parked 0,25000,50000,100000] [--wake 2000]

1. Resume against journal length (project bench/projects/perf_resume). For each length L a
   run is parked at ``wf:await("go")`` after (L - 2) / 2 steps, so its journal holds L
   entries. In a fresh Python process (the cold case), ``LocalPlatform`` opens a copy of
   that data folder (``synchronous=FULL``) and signal "go" is sent: the run is replayed
   through all L entries and parks at ``wf:await("go2")``. Its coroutine is now cached, and
   signal "go2" is the warm wake. Counters, taken by wrapping ``runtime.engine.executor.Replay``,
   ``Code.new_run``, ``Code.drive`` and the store's journal reads in that process, show
   what each wake did: the cold one builds a Replay, a new coroutine, and drives it through
   every step; the warm one builds none, reads no journal entry and drives the cached
   coroutine once (from the await to its return). Interpreter start and imports are not
   counted; the data folder is in the OS page cache (a cold process, not a cold disk).
   Target: the cold resume costs at most 50 us per journal entry at 20,000 entries.

2. Parked runs in `lunaflow dev` (project bench/projects/perf_dev). Runs parked at
   ``wf:await("go")`` are written straight into the store (``SQLiteStore.create_run`` and
   an ``append`` of the wait, the journal a real run writes, with ``synchronous=OFF`` for
   the fill only), then ``lunaflow dev`` is started on the data folder and its resident
   memory (VmRSS from /proc) read once it has settled, with the store's size on disk. At
   the largest count, ``--wake`` of the runs are then signalled over HTTP; each resumes and
   parks again at its second wait, its coroutine kept in a worker's cache (bounded: 256
   sessions per Lua state), and the memory is read again. Target: 100,000 parked runs
   hold at most 300 MB of resident memory.

Not a test: it prints figures and exits 0.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from runtime.store.sqlite import STORE_FILE

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESUME_PROJECT = ROOT / "bench" / "projects" / "perf_resume"
DEV_PROJECT = ROOT / "bench" / "projects" / "perf_dev"
RUN = "parked-run"
TARGET_US_PER_ENTRY = 50.0
TARGET_RSS_MB = 300.0


# --- 1. resume against journal length ------------------------------------------------------


def make_parked(base: Path, entries: int) -> Path:
    """A data folder holding one run parked at await 'go' with a journal of ``entries``."""
    from runtime.testing import LocalPlatform

    if entries < 2 or entries % 2:
        raise SystemExit(f"journal lengths must be even and at least 2 (got {entries})")
    data = Path(tempfile.mkdtemp(prefix=f"parked-{entries}-", dir=base))
    with LocalPlatform(RESUME_PROJECT, data_dir=data, synchronous="OFF") as p:
        run = p.start("parked", {"n": (entries - 2) // 2}, id=RUN)
        got = len(p.journal(RUN))
        if run.status != "awaiting" or got != entries:
            raise SystemExit(f"the parked run is {run.status} with {got} entries: {run.error}")
    return data


def resume_child(data: Path) -> None:
    """In a fresh process: open, signal 'go' (cold), then 'go2' (warm); print JSON."""
    t_proc = time.perf_counter()
    import runtime.engine.executor as executor_module
    from runtime.core.replay import Replay
    from runtime.engine.code import Code
    from runtime.engine.executor import Executor
    from runtime.store.sqlite import SQLiteStore
    from runtime.testing import LocalPlatform

    t_imported = time.perf_counter()
    counts = {"replays": 0, "new_runs": 0, "drives": 0, "entries_read": 0}
    spans = {"advance": 0.0, "journal_read": 0.0}

    class CountingReplay(Replay):
        def __post_init__(self) -> None:
            counts["replays"] += 1
            super().__post_init__()

    executor_module.Replay = CountingReplay  # type: ignore[attr-defined]
    original_new_run, original_drive = Code.new_run, Code.drive
    original_load, original_journal = SQLiteStore.load, SQLiteStore.journal
    original_advance = Executor.advance

    def new_run(self: Code, *args: Any) -> Any:
        counts["new_runs"] += 1
        return original_new_run(self, *args)

    def drive(self: Code, *args: Any) -> Any:
        counts["drives"] += 1
        return original_drive(self, *args)

    def load(self: SQLiteStore, run_id: str, *, after: int | None = None) -> Any:
        t = time.perf_counter()
        snap = original_load(self, run_id, after=after)
        spans["journal_read"] += time.perf_counter() - t
        counts["entries_read"] += 0 if snap is None else len(snap.journal)
        return snap

    def journal(self: SQLiteStore, run_id: str) -> Any:
        t = time.perf_counter()
        entries = original_journal(self, run_id)
        spans["journal_read"] += time.perf_counter() - t
        counts["entries_read"] += len(entries)
        return entries

    def advance(self: Executor, *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return original_advance(self, *args, **kwargs)
        finally:
            spans["advance"] += time.perf_counter() - t

    Code.new_run, Code.drive = new_run, drive  # type: ignore[method-assign, assignment]
    SQLiteStore.load, SQLiteStore.journal = load, journal  # type: ignore[method-assign]
    Executor.advance = advance  # type: ignore[method-assign]

    def snapshot() -> dict[str, float]:
        return {**counts, **spans}

    def delta(before: dict[str, float]) -> dict[str, float]:
        now = snapshot()
        return {k: now[k] - before[k] for k in now}

    t0 = time.perf_counter()
    p = LocalPlatform(RESUME_PROJECT, data_dir=data)
    t_open = time.perf_counter()
    entries = p.get(RUN).journal_len
    before = snapshot()
    t1 = time.perf_counter()
    p.signal(RUN, "go", {"ok": True})
    t_cold = time.perf_counter()
    cold = delta(before)
    mid = p.get(RUN)
    before = snapshot()
    t2 = time.perf_counter()
    p.signal(RUN, "go2", {"ok": True})
    t_warm = time.perf_counter()
    warm = delta(before)
    end = p.get(RUN)
    p.close()
    print(
        json.dumps(
            {
                "entries": entries,
                "after_go": mid.status,
                "status": end.status,
                "error": end.error,
                "imports_ms": (t_imported - t_proc) * 1000,
                "open_ms": (t_open - t0) * 1000,
                "cold_signal_ms": (t_cold - t1) * 1000,
                "cold_total_ms": (t_open - t0 + t_cold - t1) * 1000,
                "warm_signal_ms": (t_warm - t2) * 1000,
                "cold": {
                    **cold,
                    "advance": cold["advance"] * 1000,
                    "journal_read": cold["journal_read"] * 1000,
                },
                "warm": {
                    **warm,
                    "advance": warm["advance"] * 1000,
                    "journal_read": warm["journal_read"] * 1000,
                },
            }
        )
    )


def resume_once(base: Path, parked: Path) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="resume-", dir=base))
    shutil.rmtree(data)
    shutil.copytree(parked, data)
    try:
        out = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--resume-child", str(data)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=ROOT,
        )
        if out.returncode != 0:
            raise SystemExit(f"the resume process failed:\n{out.stderr}")
        figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        if figures["after_go"] != "awaiting" or figures["status"] != "completed":
            raise SystemExit(f"the resumed run ended {figures['status']}: {figures['error']}")
        return figures
    finally:
        shutil.rmtree(data, ignore_errors=True)


def resume_curve(base: Path, lengths: list[int], trials: int, log: Any = print) -> list[dict[str, Any]]:
    """Per length: medians of ``trials`` cold processes (and the warm wake in each)."""
    points = []
    for entries in lengths:
        parked = make_parked(base, entries)
        try:
            runs = [resume_once(base, parked) for _ in range(trials)]
        finally:
            shutil.rmtree(parked, ignore_errors=True)

        def med(get: Any, runs: list[dict[str, Any]] = runs) -> float:
            return float(statistics.median(get(r) for r in runs))

        point: dict[str, Any] = {
            "entries": entries,
            "open_ms": med(lambda r: r["open_ms"]),
            "cold_signal_ms": med(lambda r: r["cold_signal_ms"]),
            "cold_total_ms": med(lambda r: r["cold_total_ms"]),
            "cold_replay_ms": med(lambda r: r["cold"]["advance"]),
            "cold_journal_read_ms": med(lambda r: r["cold"]["journal_read"]),
            "warm_signal_ms": med(lambda r: r["warm_signal_ms"]),
            "warm_advance_ms": med(lambda r: r["warm"]["advance"]),
            "imports_ms": med(lambda r: r["imports_ms"]),
            # Counters are the same in every trial; keep the last.
            "cold_counts": {
                k: runs[-1]["cold"][k] for k in ("replays", "new_runs", "drives", "entries_read")
            },
            "warm_counts": {
                k: runs[-1]["warm"][k] for k in ("replays", "new_runs", "drives", "entries_read")
            },
            "trials_cold_total_ms": [r["cold_total_ms"] for r in runs],
        }
        point["cold_us_per_entry"] = point["cold_total_ms"] * 1000 / entries
        points.append(point)
        log(
            f"  resume, {entries:>6} entries: cold {point['cold_total_ms']:8.1f} ms "
            f"({point['cold_us_per_entry']:.1f} us/entry), warm {point['warm_signal_ms']:.2f} ms"
        )
    return points


def _counts(c: dict[str, float]) -> str:
    return f"{c['replays']:.0f}/{c['new_runs']:.0f}/{c['drives']:,.0f}/{c['entries_read']:,.0f}"


def resume_table(points: list[dict[str, Any]]) -> str:
    lines = [
        f"{'entries':>8} {'cold total':>11} {'per entry':>10} {'replay':>9} {'journal rd':>11} "
        f"{'warm wake':>10}   {'cold R/C/D/E':<22} {'warm R/C/D/E':<14}",
    ]
    for p in points:
        c, w = p["cold_counts"], p["warm_counts"]
        lines.append(
            f"{p['entries']:>8,} {p['cold_total_ms']:>8.1f} ms {p['cold_us_per_entry']:>7.1f} us "
            f"{p['cold_replay_ms']:>6.1f} ms {p['cold_journal_read_ms']:>8.1f} ms "
            f"{p['warm_signal_ms']:>7.2f} ms"
            f"   {_counts(c):<22} {_counts(w):<14}"
        )
    lines.append(
        "R/C/D/E: Replay objects built / Lua coroutines created / drives of a coroutine / journal "
        "entries read from the store, during that wake"
    )
    last = points[-1]
    verdict = "meets" if last["cold_us_per_entry"] <= TARGET_US_PER_ENTRY else "MISSES"
    lines.append(
        f"target: cold resume at {last['entries']:,} entries at most {TARGET_US_PER_ENTRY:g} us per entry: "
        f"{last['cold_us_per_entry']:.1f} us, {verdict} target"
    )
    no_replay = all(
        p["warm_counts"]["replays"] == 0
        and p["warm_counts"]["new_runs"] == 0
        and p["warm_counts"]["entries_read"] == 0
        for p in points
    )
    lines.append(
        "target: a warm wake does not replay (0 Replay built, 0 coroutines created, 0 journal entries "
        f"read, 1 drive of the cached coroutine): {'meets' if no_replay else 'MISSES'} target"
    )
    lines.append(
        "cold total: opening LocalPlatform (project load, store open) + signal until parked again "
        "(replay, the wait's commit); interpreter start and imports not counted "
        f"({statistics.median(p['imports_ms'] for p in points):.0f} ms)"
    )
    return "\n".join(lines)


def plot_resume(points: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [p["entries"] for p in points]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax.plot(
        xs,
        [p["cold_total_ms"] for p in points],
        "o-",
        label="cold process: open + signal to parked",
        color="#dd6b20",
    )
    ax.plot(
        xs,
        [p["cold_replay_ms"] for p in points],
        "s--",
        label="cold: the replaying activation",
        color="#c05621",
    )
    ax.plot(
        xs,
        [p["warm_signal_ms"] for p in points],
        "o-",
        label="warm (cached coroutine): signal to completed",
        color="#2b6cb0",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("journal entries")
    ax.set_ylabel("ms (log scale)")
    ax.set_title("resume cost against journal length")
    ax.legend(fontsize=8)
    ax2.plot(xs, [p["cold_us_per_entry"] for p in points], "o-", color="#dd6b20", label="cold, per entry")
    ax2.axhline(
        TARGET_US_PER_ENTRY, color="#e53e3e", linestyle=":", label=f"target {TARGET_US_PER_ENTRY:g} us"
    )
    ax2.set_xscale("log")
    ax2.set_ylim(bottom=0)
    ax2.set_xlabel("journal entries")
    ax2.set_ylabel("us per journal entry")
    ax2.set_title("cold resume per journal entry")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- 2. parked runs in lunaflow dev --------------------------------------------------------


def parked_template() -> tuple[Any, Any, str | None]:
    """The journal a real waiter run writes when it parks at its first await."""
    from runtime.testing import LocalPlatform

    with LocalPlatform(DEV_PROJECT) as p:
        run = p.start("waiter", {"n": 2}, id="template")
        entries = p.journal("template")
    if run.status != "awaiting" or len(entries) != 2:
        raise SystemExit(f"the template run is {run.status} with {len(entries)} entries")
    return entries[0], entries[1], run.current_step


def populate(data: Path, start: int, stop: int) -> None:
    """Write runs pk-<start>..pk-<stop - 1>, each parked at its first await, into the store."""
    from dataclasses import replace

    from runtime.core.journal import Status
    from runtime.store.base import RunRecord, RunUpdate
    from runtime.store.sqlite import SQLiteStore

    started, wait, current = parked_template()
    store = SQLiteStore(data / STORE_FILE, synchronous="OFF")
    try:
        at = time.time()
        for i in range(start, stop):
            run_id = f"pk-{i}"
            record = RunRecord(
                id=run_id,
                workflow="waiter",
                status=Status.RUNNING,
                input={"n": 2},
                created_at=at,
                updated_at=at,
            )
            _, created = store.create_run(record, replace(started, at=at))
            if not created:
                raise SystemExit(f"run {run_id} exists already")
            store.append(run_id, 1, [replace(wait, at=at)], update=RunUpdate(Status.AWAITING, current))
            for woken, token in store.wakeups():
                store.clear_wakeup(woken, token)
    finally:
        store.close()


def _rss_kb(pid: int) -> tuple[int, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    hwm = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    return rss, hwm


class Dev:
    """A `lunaflow dev` process on a project and data folder, on a free loopback port."""

    def __init__(self, project: Path, data: Path) -> None:
        self.log = open(data.parent / f"{data.name}-dev.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "runtime.cli", "dev", str(project), "--data", str(data), "--port", "0"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        self.t_started = time.perf_counter()
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        found = re.search(r"http://([\d.]+):(\d+)", line)
        if not found:
            self.stop()
            raise SystemExit(f"lunaflow dev did not start: {line!r} (log: {self.log.name})")
        self.host, self.port = found.group(1), int(found.group(2))
        self.ready_s = time.perf_counter() - self.t_started

    def request(self, method: str, path: str) -> tuple[int, Any]:
        """One request on its own connection (a keep-alive connection to lunaflow dev waits
        about 40 ms per response: see bench/latency.py)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.request(method, path, body=b"" if method == "POST" else None)
            response = conn.getresponse()
            body = response.read()
        finally:
            conn.close()
        try:
            return response.status, json.loads(body)
        except ValueError:
            return response.status, body.decode("utf-8", "replace")

    def rss_settled(self, settle_s: float = 2.0) -> dict[str, float]:
        """VmRSS once it has stopped moving (the largest of the last samples), and VmHWM."""
        time.sleep(settle_s)
        samples = []
        for _ in range(5):
            samples.append(_rss_kb(self.proc.pid))
            time.sleep(0.2)
        return {"rss_mb": max(s[0] for s in samples) / 1024, "hwm_mb": max(s[1] for s in samples) / 1024}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()


def _size_mb(data: Path) -> tuple[float, float]:
    store = sum(f.stat().st_size for f in data.glob(STORE_FILE + "*")) / 1e6
    total = sum(f.stat().st_size for f in data.rglob("*") if f.is_file()) / 1e6
    return store, total


def _count_resumed(data: Path, ids: list[str]) -> int:
    db = sqlite3.connect(f"file:{data / STORE_FILE}?mode=ro", uri=True)
    try:
        marks = ",".join("?" * len(ids))
        row = db.execute(
            f"SELECT COUNT(*) FROM runs r WHERE id IN ({marks}) "
            "AND (SELECT MAX(seq) FROM journal WHERE run_id = r.id) >= 4",
            ids,
        ).fetchone()
        return int(row[0])
    finally:
        db.close()


def parked_memory(
    base: Path, counts: list[int], wake: int, log: Any = print, settle_s: float = 2.0
) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="parked-dev-", dir=base))
    points: list[dict[str, Any]] = []
    woken: dict[str, Any] = {}
    have = 0
    try:
        for count in sorted(counts):
            t = time.perf_counter()
            populate(data, have, count)
            fill_s = time.perf_counter() - t
            have = count
            dev = Dev(DEV_PROJECT, data)
            try:
                status, body = dev.request("GET", f"/status/pk-{count - 1}")
                if count and (status != 200 or body != {"status": "awaiting"}):
                    raise SystemExit(f"lunaflow dev does not see the parked runs: {status} {body}")
                mem = dev.rss_settled(settle_s)
                if count == max(counts) and wake > 0 and count > 0:
                    ids = [f"pk-{i}" for i in range(min(wake, count))]
                    t = time.perf_counter()
                    for i, run_id in enumerate(ids):
                        status, body = dev.request("POST", f"/signal/{run_id}?i={i}")
                        if status != 202:
                            raise SystemExit(f"signal to {run_id} refused: {status} {body}")
                    deadline = time.time() + 300
                    while (done := _count_resumed(data, ids)) < len(ids):
                        if time.time() > deadline:
                            raise SystemExit(f"only {done} of {len(ids)} signalled runs resumed")
                        time.sleep(0.2)
                    wake_s = time.perf_counter() - t
                    after = dev.rss_settled(settle_s)
                    woken = {"runs": len(ids), "seconds": wake_s, **after}
            finally:
                dev.stop()
            store_mb, total_mb = _size_mb(data)
            point = {
                "runs": count,
                **mem,
                "store_mb": store_mb,
                "data_mb": total_mb,
                "fill_s": fill_s,
                "startup_s": dev.ready_s,
            }
            points.append(point)
            log(
                f"  parked runs {count:>7,}: lunaflow dev RSS {mem['rss_mb']:.1f} MB, "
                f"store {store_mb:.1f} MB "
                f"(fill {fill_s:.1f} s, server up in {dev.ready_s:.2f} s)"
            )
    finally:
        shutil.rmtree(data, ignore_errors=True)
    return {"points": points, "woken": woken}


def parked_table(result: dict[str, Any]) -> str:
    lines = [
        f"{'parked runs':>12} {'RSS':>9} {'peak RSS':>9} {'store':>10} {'per run':>10} {'data folder':>12}"
    ]
    for p in result["points"]:
        per_run = f"{p['store_mb'] * 1e6 / p['runs']:,.0f} B" if p["runs"] else "-"
        lines.append(
            f"{p['runs']:>12,} {p['rss_mb']:>6.1f} MB {p['hwm_mb']:>6.1f} MB {p['store_mb']:>7.1f} MB "
            f"{per_run:>10} {p['data_mb']:>9.1f} MB"
        )
    w = result.get("woken") or {}
    if w:
        lines.append(
            f"after signalling {w['runs']:,} of them over HTTP (each resumes and parks again, its coroutine "
            f"cached, at most 256 per Lua state): RSS {w['rss_mb']:.1f} MB, peak {w['hwm_mb']:.1f} MB "
            f"({w['runs'] / w['seconds']:,.0f} signals/s)"
        )
    top = max(result["points"], key=lambda p: p["runs"])
    worst = max(top["rss_mb"], w.get("rss_mb", 0.0))
    verdict = "meets" if worst <= TARGET_RSS_MB else "MISSES"
    lines.append(
        f"target: {top['runs']:,} parked runs in lunaflow dev at most {TARGET_RSS_MB:g} MB resident: "
        f"{worst:.1f} MB, {verdict} target"
    )
    return "\n".join(lines)


def plot_parked(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = result["points"]
    xs = [p["runs"] for p in pts]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(
        xs, [p["rss_mb"] for p in pts], "o-", color="#2b6cb0", label="lunaflow dev resident memory (VmRSS)"
    )
    ax.plot(xs, [p["store_mb"] for p in pts], "s-", color="#718096", label="store on disk (lunaflow.sqlite)")
    w = result.get("woken") or {}
    if w:
        ax.plot(
            [xs[-1]],
            [w["rss_mb"]],
            "D",
            color="#dd6b20",
            label=f"RSS after waking {w['runs']:,} (coroutines cached)",
        )
    ax.axhline(TARGET_RSS_MB, color="#e53e3e", linestyle=":", label=f"target {TARGET_RSS_MB:g} MB")
    ax.set_xlabel("parked runs")
    ax.set_ylabel("MB")
    ax.set_ylim(bottom=0)
    ax.set_title("parked runs: memory and store size")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--resume-child":
        resume_child(Path(sys.argv[2]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=None, help="where to create data folders")
    ap.add_argument("--lengths", default="100,1000,2000,5000,10000,20000")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--parked", default="0,25000,50000,100000")
    ap.add_argument("--wake", type=int, default=2000)
    ap.add_argument(
        "--plots", type=Path, default=None, help="write bench_resume.png and bench_parked.png here"
    )
    a = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="lunaflow-scaling-", dir=a.dir))
    try:
        points = resume_curve(base, [int(x) for x in a.lengths.split(",")], a.trials)
        print()
        print(resume_table(points))
        print()
        parked = parked_memory(base, [int(x) for x in a.parked.split(",")], a.wake)
        print()
        print(parked_table(parked))
        if a.plots is not None:
            plot_resume(points, a.plots / "bench_resume.png")
            plot_parked(parked, a.plots / "bench_parked.png")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()

"""Step cost and cold-resume cost on the local platform (SQLite, synchronous=FULL).

    python3 bench/steps.py [--dir DIR] [--steps 1000] [--parked-steps 999] [--trials 3]

Prints plain text: the wall time per step of a 1,000-step workflow (a Lua loop of
wf:step), and the time a fresh process takes to resume a run parked at an await whose
journal holds 2,000 entries: from opening LocalPlatform to the run completing after a
signal, and the replay part of that (the executor's activation: journal read, replay
through the Lua code, the completion commit). Each figure is the median of --trials runs,
on fresh data folders under --dir (default: the system temp folder; the figures depend
on that disk's fsync cost, so the file system is printed too).

Not a test: it asserts nothing and exits 0 whether or not targets are met.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PROJECT = ROOT / "bench" / "projects" / "steps"
TARGET_STEP_MS = 1.0
TARGET_RESUME_MS = 100.0
PARKED_RUN = "parked-run"


def fs_type(path: Path) -> str:
    """The file system holding ``path`` (from /proc/mounts; 'unknown' elsewhere)."""
    try:
        best, kind = "", "unknown"
        real = str(path.resolve())
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            mount, fstype = parts[1], parts[2]
            if (real == mount or real.startswith(mount.rstrip("/") + "/")) and len(mount) > len(best):
                best, kind = mount, fstype
        return f"{kind} (mounted at {best})" if best else kind
    except OSError:
        return "unknown"


def bench_steps(base: Path, n: int, synchronous: str) -> float:
    """Milliseconds per step for one run of the n-step loop on a fresh data folder."""
    from runtime.testing import LocalPlatform

    data = Path(tempfile.mkdtemp(prefix="steps-", dir=base))
    try:
        with LocalPlatform(PROJECT, data_dir=data, synchronous=synchronous) as p:
            t0 = time.perf_counter()
            run = p.start("loop", {"n": n}, id="loop-run")
            elapsed = time.perf_counter() - t0
            if run.status != "completed" or run.result != {"total": n * (n + 1) // 2}:
                raise SystemExit(f"the loop run ended {run.status}: {run.error or run.result}")
            entries = len(p.journal("loop-run"))
            if entries != 2 * n + 2:
                raise SystemExit(f"the loop run's journal holds {entries} entries, expected {2 * n + 2}")
        return elapsed * 1000 / n
    finally:
        shutil.rmtree(data, ignore_errors=True)


def make_parked(base: Path, n: int) -> tuple[Path, int]:
    """A data folder holding one run parked at await 'go' after n steps."""
    from runtime.testing import LocalPlatform

    data = Path(tempfile.mkdtemp(prefix="parked-", dir=base))
    with LocalPlatform(PROJECT, data_dir=data) as p:
        run = p.start("parked", {"n": n}, id=PARKED_RUN)
        if run.status != "awaiting":
            raise SystemExit(f"the parked run is {run.status}: {run.error}")
        entries = len(p.journal(PARKED_RUN))
    return data, entries


def resume_child(data: Path) -> None:
    """In a fresh process: open, signal, run to completion; print timings as JSON."""
    t_proc = time.perf_counter()
    from runtime.engine.executor import Executor
    from runtime.store.sqlite import SQLiteStore
    from runtime.testing import LocalPlatform

    t_imported = time.perf_counter()
    spans: dict[str, float] = {"advance": 0.0, "journal_read": 0.0}
    original_journal = SQLiteStore.journal

    def timed_journal(self: SQLiteStore, run_id: str) -> Any:
        t = time.perf_counter()
        try:
            return original_journal(self, run_id)
        finally:
            spans["journal_read"] += time.perf_counter() - t

    SQLiteStore.journal = timed_journal  # type: ignore[method-assign]

    original_advance = Executor.advance

    def timed_advance(self: Executor, run_id: str, code: Any) -> None:
        t = time.perf_counter()
        try:
            original_advance(self, run_id, code)
        finally:
            spans["advance"] += time.perf_counter() - t

    Executor.advance = timed_advance  # type: ignore[method-assign]

    t0 = time.perf_counter()
    p = LocalPlatform(PROJECT, data_dir=data)
    t_opened = time.perf_counter()
    p.signal(PARKED_RUN, "go", {"ok": True})
    t_done = time.perf_counter()
    run = p.get(PARKED_RUN)
    p.close()
    print(
        json.dumps(
            {
                "status": run.status,
                "error": run.error,
                "imports_ms": (t_imported - t_proc) * 1000,
                "open_ms": (t_opened - t0) * 1000,
                "signal_to_completed_ms": (t_done - t_opened) * 1000,
                "total_ms": (t_done - t0) * 1000,
                "replay_ms": spans["advance"] * 1000,
                "journal_read_ms": spans["journal_read"] * 1000,
            }
        )
    )


def bench_resume(base: Path, parked: Path) -> dict[str, Any]:
    """Copy the parked data folder and time its resume in a new Python process."""
    data = Path(tempfile.mkdtemp(prefix="resume-", dir=base))
    shutil.rmtree(data)
    shutil.copytree(parked, data)
    try:
        t = time.perf_counter()
        out = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--resume-child", str(data)],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
        )
        wall = (time.perf_counter() - t) * 1000
        if out.returncode != 0:
            raise SystemExit(f"the resume process failed:\n{out.stderr}")
        figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        if figures["status"] != "completed":
            raise SystemExit(f"the resumed run ended {figures['status']}: {figures['error']}")
        figures["process_wall_ms"] = wall
        return figures
    finally:
        shutil.rmtree(data, ignore_errors=True)


def verdict(value: float, target: float) -> str:
    return "meets target" if value <= target else "MISSES target"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=None, help="where to create data folders")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--parked-steps", type=int, default=999, help="999 steps: a 2,000-entry journal")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--resume-child", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument(
        "--make-parked",
        type=Path,
        default=None,
        metavar="DIR",
        help="only create a data folder under DIR holding the parked run, print its path, exit",
    )
    a = ap.parse_args()
    if a.make_parked is not None:
        a.make_parked.mkdir(parents=True, exist_ok=True)
        data, entries = make_parked(a.make_parked, a.parked_steps)
        print(f"{data} ({entries} entries)")
        return
    if a.resume_child is not None:
        resume_child(a.resume_child)
        return

    base = Path(tempfile.mkdtemp(prefix="lunaflow-bench-", dir=a.dir))
    try:
        import lupa

        print("lunaflow bench/steps.py")
        print(f"python {sys.version.split()[0]}, lupa {lupa.__version__}, {os.cpu_count()} CPUs")
        print(f"data folders under {base}, file system {fs_type(base)}")
        print(f"median of {a.trials} trials, each on a fresh data folder")
        print()

        full = [bench_steps(base, a.steps, "FULL") for _ in range(a.trials)]
        off = [bench_steps(base, a.steps, "OFF") for _ in range(a.trials)]
        per_step = statistics.median(full)
        print(f"1. a {a.steps}-step workflow (Lua loop of wf:step), SQLite synchronous=FULL")
        print(
            f"   per step: {per_step:.3f} ms   (target <= {TARGET_STEP_MS:.0f} ms: "
            f"{verdict(per_step, TARGET_STEP_MS)})"
        )
        print(
            f"   trials: {', '.join(f'{x:.3f}' for x in full)} ms/step; whole run {per_step * a.steps:.0f} ms"
        )
        print(
            f"   for reference, synchronous=OFF: {statistics.median(off):.3f} ms/step "
            "(the difference is the fsync per commit)"
        )
        print()

        parked, entries = make_parked(base, a.parked_steps)
        trials = [bench_resume(base, parked) for _ in range(a.trials)]

        def med(key: str) -> float:
            return statistics.median(t[key] for t in trials)

        total = med("total_ms")
        print(
            f"2. resume in a fresh process of a run parked at an await, journal {entries} entries "
            f"({a.parked_steps} steps)"
        )
        print(
            f"   open LocalPlatform -> signal -> completed: {total:.1f} ms   "
            f"(target <= {TARGET_RESUME_MS:.0f} ms: {verdict(total, TARGET_RESUME_MS)})"
        )
        print(f"     open LocalPlatform (load project, open store):  {med('open_ms'):.1f} ms")
        print(f"     signal until completed:                         {med('signal_to_completed_ms'):.1f} ms")
        print(f"       of which replay (executor activation):        {med('replay_ms'):.1f} ms")
        print(f"         of which reading the journal from SQLite:   {med('journal_read_ms'):.1f} ms")
        totals = ", ".join(f"{t['total_ms']:.1f}" for t in trials)
        print(f"   trials (total): {totals} ms")
        print(
            f"   not counted: interpreter start and imports, {med('imports_ms'):.0f} ms "
            f"(whole child process {med('process_wall_ms'):.0f} ms)"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

"""The console's runs list over 10,000 runs on SQLite: time to render its first page.

    python3 bench/console_list.py [--runs 10000] [--trials 50] [--dir DIR]

Issue: "The runs list of 10,000 runs renders its first page in under 200 ms on SQLite."

It fills a fresh SQLite store (runtime.store.sqlite.SQLiteStore, ``synchronous=OFF`` for
the fill only) with --runs runs through ``create_run``, spread over four workflows and all
six statuses, one created every second, and then times, --trials times each, the median of:
- ``console_render.runs_page`` first page, no filter (the target), with the local actions
  and with the CloudWatch ones;
- the same with a status filter, a workflow filter, and both;
- a deep page (runs 5,001-5,050), which reads every row before it;
- the whole local request, ``GET /_console`` through ``console_page.render_console``
  (the page wrapped in its document), on a store reopened as ``lunaflow dev`` opens it
  (``synchronous=FULL``).

Not a test: it asserts nothing and exits 0 whether or not the target is met.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime.console import page as console_page  # noqa: E402
from runtime.console import render  # noqa: E402
from runtime.core.clock import SystemClock  # noqa: E402
from runtime.core.journal import Entry, Kind  # noqa: E402
from runtime.platform.runs import Runs  # noqa: E402
from runtime.store.base import RunRecord  # noqa: E402
from runtime.store.sqlite import SQLiteStore  # noqa: E402

TARGET_MS = 200.0
WORKFLOWS = ("settle-sale", "pay-sale", "charge", "nightly-report")
# Seven statuses against four workflows (coprime), so every pair of filters finds runs.
STATUSES = ("completed", "completed", "awaiting", "sleeping", "failed", "cancelled", "running")
T0 = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC


def fill(path: Path, n: int) -> float:
    """Create ``n`` runs; returns the seconds it took."""
    store = SQLiteStore(path, synchronous="OFF")
    began = time.perf_counter()
    for i in range(n):
        at = T0 + i
        status = STATUSES[i % len(STATUSES)]
        run = RunRecord(
            id=f"run-{i:05d}",
            workflow=WORKFLOWS[i % len(WORKFLOWS)],
            status=status,
            input={"lot": i, "winner": "ada", "price": 25},
            current_step=None if status in ("completed", "cancelled") else "step 'notify'",
            created_at=at,
            updated_at=at + 1,
        )
        store.create_run(run, Entry(1, Kind.STARTED, run.workflow, {"format": 1, "input": run.input}, at))
    took = time.perf_counter() - began
    store.close()
    return took


def median_ms(fn: Callable[[], object], trials: int) -> tuple[float, float]:
    """(median, max) in milliseconds over ``trials`` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(trials):
        began = time.perf_counter()
        fn()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), max(times)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument(
        "--dir", type=Path, default=None, help="where the store goes (default: a temp folder)"
    )
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="console-list-", dir=args.dir))
    try:
        path = base / "lunaflow.sqlite"
        took = fill(path, args.runs)
        print(f"filled {args.runs} runs in {took:.2f} s (synchronous=OFF) at {path}")
        store = SQLiteStore(path)  # as `lunaflow dev` opens it
        runs = Runs(store, SystemClock())
        local = render.LocalActions()
        cloudwatch = render.CloudWatchActions(
            endpoint="arn:aws:lambda:eu-west-1:123456789012:function:console"
        )
        Q = render.RunQuery
        first = render.runs_page(runs, local, Q())
        shown = first.count("<tr>") - 1
        print(f"first page: {shown} rows, {len(first)} characters of HTML\n")

        cases: list[tuple[str, Callable[[], object]]] = [
            (
                "first page, no filter (local actions)",
                lambda: render.runs_page(runs, local, Q()),
            ),
            (
                "first page, no filter (CloudWatch actions)",
                lambda: render.runs_page(runs, cloudwatch, Q()),
            ),
            (
                "first page, status=failed",
                lambda: render.runs_page(runs, local, Q(status="failed")),
            ),
            (
                "first page, workflow=charge",
                lambda: render.runs_page(runs, local, Q(workflow="charge")),
            ),
            (
                "first page, status=failed workflow=charge",
                lambda: render.runs_page(runs, local, Q(status="failed", workflow="charge")),
            ),
            (
                "page 101 (runs 5001-5050), no filter",
                lambda: render.runs_page(runs, local, Q(page=100)),
            ),
            (
                "GET /_console (render_console, whole document)",
                lambda: console_page.render_console(runs, "GET", "/_console", {}, poke=lambda: None),
            ),
        ]
        width = max(len(name) for name, _ in cases)
        results = {}
        for name, fn in cases:
            med, worst = median_ms(fn, args.trials)
            results[name] = med
            page = fn()
            rows = str(getattr(page, "body", page)).count("<tr>") - 1
            print(f"{name:<{width}}  median {med:7.2f} ms   max {worst:7.2f} ms   ({rows} rows)")
        store.close()
        headline = results[cases[0][0]]
        verdict = "met" if headline < TARGET_MS else "MISSED"
        print(
            f"\ntarget: the first page of {args.runs} runs renders in under {TARGET_MS:.0f} ms: "
            f"{headline:.2f} ms median over {args.trials} trials — {verdict}"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Flow control (issue 30): runs through a concurrency limit of 10 per key.

    python3 bench/flow.py [--runs 1000] [--aws-runs 200] [--call-ms 5]

Each run of ``limited`` (bench/projects/flow) holds its key's slot for one object call that
sleeps ``--call-ms``, the stand-in recording when each call began and ended. Two shapes:
``--runs`` over 100 keys (10 a key: the limit is met, nobody waits) and over 10 keys (100 a
key: 90 of each wait). The platform advances woken runs on 8 threads (``workers=8``), on a
real clock. Printed:

- throughput (runs completed a second, start of the first to end of the last) beside the
  same runs of ``free`` (no limit): what the gate costs (no timer is involved, so the harness's fake clock
  changes nothing);
- the hand-off: for each run that waited (with a backlog, and quiet: 20 runs of one key, a
  worker each, so nothing else is queued), the time from the end of the call of the run whose
  slot it took (the k-th end of its key) to the start of its own call (the k+10-th start):
  its end's write, the release and admission, the wake, the next run's activation. p50 and
  p99;
- on AwsPlatform (DynamoDB on moto), the DynamoDB requests one run's gate adds, by
  operation, and the write units they consume (a write under 1 KB is one WRU).

Not a test: it prints figures and exits 0.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime.testing import AwsPlatform, LocalPlatform  # noqa: E402

PROJECT = ROOT / "bench" / "projects" / "flow"
LIMIT = 10


class Work:
    def __init__(self, call_s: float) -> None:
        self.call_s = call_s
        self.lock = threading.Lock()
        self.calls: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)

    def __call__(self, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        began = time.perf_counter()
        time.sleep(self.call_s)
        with self.lock:
            self.calls[key].append((began, time.perf_counter()))
        return [args[0]]


def shape(
    kind: str, workflow: str, runs: int, keys: int, call_s: float, workers: int = 8
) -> dict[str, float]:
    work = Work(call_s)
    make = {"local": LocalPlatform, "aws": AwsPlatform}[kind]
    with make(PROJECT, objects=work, workers=workers) as p:
        t0 = time.perf_counter()
        for i in range(runs):
            p.platform.start(workflow, {"key": f"k{i % keys}", "n": i}, id=f"{workflow}-{i}")
        p.settle()
        took = time.perf_counter() - t0
        done = sum(1 for r in p.runs(workflow=workflow) if r.status.value == "completed")
    assert done == runs, f"{done} of {runs} completed"
    handoffs: list[float] = []
    most = 0
    for calls in work.calls.values():
        starts = sorted(b for b, _ in calls)
        ends = sorted(e for _, e in calls)
        for k in range(len(starts) - LIMIT):
            handoffs.append(max(0.0, starts[k + LIMIT] - ends[k]))
        for b, _ in calls:
            most = max(most, sum(1 for b2, e2 in calls if b2 <= b < e2))
    out = {"runs_per_s": runs / took, "seconds": took, "most_at_once": float(most)}
    if handoffs:
        handoffs.sort()
        out["handoff_p50_ms"] = statistics.median(handoffs) * 1000
        out["handoff_p99_ms"] = handoffs[min(len(handoffs) - 1, int(len(handoffs) * 0.99))] * 1000
    return out


def gate_requests() -> dict[str, int]:
    """DynamoDB requests of one run of ``limited`` less those of one run of ``free``."""
    counts: dict[str, collections.Counter[str]] = {}
    for workflow in ("limited", "free"):
        seen: collections.Counter[str] = collections.Counter()
        with AwsPlatform(PROJECT, objects=lambda *a: [1]) as p:
            p.start(workflow, {"key": "warm", "n": 0}, id="warm")
            p.clients.dynamodb.meta.events.register(
                "provide-client-params.dynamodb.*",
                lambda params, model, _seen=seen, **_: _seen.update([model.name]),
            )
            p.start(workflow, {"key": "k", "n": 1}, id="one")
        counts[workflow] = seen
    return {op: counts["limited"][op] - counts["free"][op] for op in counts["limited"] | counts["free"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--aws-runs", type=int, default=200)
    ap.add_argument("--call-ms", type=float, default=5.0)
    args = ap.parse_args()
    call_s = args.call_ms / 1000
    print(f"limit {LIMIT} per key, {args.call_ms:g} ms object call per run, 8 workers")
    for kind, runs in (("local", args.runs), ("aws", args.aws_runs)):
        for keys in (100, 10) if kind == "local" else (max(1, runs // 100),):
            limited = shape(kind, "limited", runs, keys, call_s)
            free = shape(kind, "free", runs, keys, call_s)
            line = (
                f"{kind:5} {runs} runs / {keys} keys: limited {limited['runs_per_s']:.0f} runs/s "
                f"(free {free['runs_per_s']:.0f} runs/s), most at once per key {limited['most_at_once']:.0f}"
            )
            if "handoff_p50_ms" in limited:
                p50, p99 = limited["handoff_p50_ms"], limited["handoff_p99_ms"]
                line += f", hand-off p50 {p50:.0f} ms p99 {p99:.0f} ms"
                line += " (behind the backlog of runs woken before it)"
            print(line, flush=True)
    # A hand-off with nothing else queued: 20 runs of one key, each call 50 ms, a worker each.
    for kind in ("local", "aws"):
        quiet = shape(kind, "limited", 2 * LIMIT, 1, 0.05, workers=2 * LIMIT)
        print(
            f"{kind:5} quiet hand-off (20 runs, 1 key, 50 ms calls, 20 workers): "
            f"p50 {quiet['handoff_p50_ms']:.1f} ms p99 {quiet['handoff_p99_ms']:.1f} ms, "
            f"most at once {quiet['most_at_once']:.0f}",
            flush=True,
        )
    extra = gate_requests()
    writes = {op: n for op, n in extra.items() if op in ("PutItem", "UpdateItem", "DeleteItem") and n}
    reads = {op: n for op, n in extra.items() if op in ("GetItem", "Query", "BatchGetItem") and n}
    print(
        f"aws: one gated run adds writes {dict(sorted(writes.items()))} = {sum(writes.values())} WRU "
        f"(each under 1 KB), reads {dict(sorted(reads.items()))}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Index write units per start, park, signal and timer (issue 16, point 1).

    python3 bench/aws_index_writes.py

Runs bench/projects/aws_steps's workflows through ``AwsRuntime`` on in-process moto (the
deployment and meter of bench/aws_cost.py) and prints, for each operation, the table's
write units and the global secondary indexes' write units, with the index partition keys
the run's item wrote. The rule for index writes (``Meter._index_writes``): an item is in
an index when it has both of the index's key attributes; the entry is written (1 WRU per
KB, entry = the attributes it carries + 100 bytes) when the item enters or leaves the
index or when an attribute the entry carries changes; a changed index key is a delete and
a put (two writes). Operations:

- start: the API side creates the run (one put);
- park: the run's first activation, which parks it awaiting a signal;
- signal: a signal sent (numbered, wake-up set) and consumed (lease, load, append, re-park);
- timer: a 1 h sleep's timer firing (the Scheduler entry's wake) and the run sleeping again.

Also printed: how many distinct index partition keys 200 runs of one workflow wrote (the
hot-partition figure: 1 per key on main, up to the shard count after).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import aws_cost  # noqa: E402

KEYS = ("status_pk", "workflow_pk", "wake_pk", "timer_pk")  # no all_pk on new runs (stop 47)


def main() -> None:
    import warnings

    warnings.simplefilter("ignore")
    from runtime.store import dynamodb

    print("index writes per operation (moto; units from item sizes and the index rule in this file's doc)")
    print(f"  projections: { {k: v or 'keys only' for k, v in aws_cost.index_projections().items()} }")
    print(f"  {'operation':<44} {'trips':>6} {'WRU':>6} {'GSI WRU':>8}")
    with aws_cost.deployment(aws_cost.STEPS_PROJECT) as d:
        with d.meter.measuring("start"):
            d.front.platform.start("signals", {"n": 3}, id="sig")
        with d.meter.measuring("park"):
            d.settle()
        with d.meter.measuring("signal"):
            d.front.platform.signal("sig", "go", {"i": 1})
            d.settle()
        d.front.platform.start("timers", {"n": 3, "every": 3600}, id="tim")
        d.settle()
        with d.meter.measuring("timer"):
            d.clock.advance(3600)
            d.settle()
        for phase, label in (
            ("start", "start (create the run)"),
            ("park", "park (first activation, awaiting)"),
            ("signal", "signal (send, consume, park again)"),
            ("timer", "timer (1 h sleep fires, run sleeps again)"),
        ):
            s = d.sums(phase)
            print(f"  {label:<44} {s.requests:>6} {s.wru:>6.1f} {s.gsi_wru:>8.1f}")
        seen: dict[str, set[str]] = {k: set() for k in KEYS}

        def look() -> None:
            for i in range(200):
                item = d.admin.get_item(TableName=d.table, Key=dynamodb.run_key(f"spread-{i}"))["Item"]
                for k in KEYS:
                    if k in item:
                        seen[k].add(item[k]["S"])

        for i in range(200):
            d.front.platform.start("timers", {"n": 1, "every": 3600}, id=f"spread-{i}")
        look()  # started: a wake-up waiting each
        d.settle()
        look()  # sleeping: a timer each
        counts = Counter({k: len(v) for k, v in seen.items()})
        print("  distinct index partition keys written by 200 runs of one workflow (started, then sleeping):")
        print("    " + ", ".join(f"{k} {counts[k]}" for k in KEYS))


if __name__ == "__main__":
    main()

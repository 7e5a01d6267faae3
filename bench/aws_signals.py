"""Read units per consumed signal as a run's signals pile up (issue 16, point 2).

    python3 bench/aws_signals.py [--signals 1000] [--every 100] [--cold]

One run of bench/projects/aws_steps's "signals" workflow awaits N signals in turn; each is
sent from the API side (the fetch Lambda's runtime) and delivered to the worker, as
bench/aws_cost.py does, on in-process moto. For the 1st, the 100th, 200th, ... signal it
prints what sending and consuming that one signal cost: DynamoDB round trips, read request
units (RRU: per GetItem or Query page, the items read rounded up to 4 KB, strongly
consistent; the same meter as bench/aws_cost.py, since moto does not size its capacity),
items read, and write units.

Warm (the default): one worker container serves every wake, as Lambda does while it stays
warm; its cached session reads only what was appended since. ``--cold``: a fresh container
per wake, which replays the whole journal (O(n) by design: a resuming run replays from the
top).

Target: the read units per consumed signal stay flat (O(1)) however many came before.
Not a test: it prints figures and exits 0.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import aws_cost  # noqa: E402  (bench/aws_cost.py: the deployment and the meter)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--signals", type=int, default=1000)
    parser.add_argument("--every", type=int, default=100, help="print every Nth signal (and the 1st)")
    parser.add_argument("--cold", action="store_true", help="a fresh worker container per wake")
    args = parser.parse_args()
    import warnings

    warnings.simplefilter("ignore")
    n = args.signals
    print(f"one run consuming {n} signals in turn ({'cold' if args.cold else 'warm'} worker), per signal:")
    print(f"  {'signal':>7} {'trips':>6} {'RRU':>7} {'items read':>11} {'WRU':>6}")
    with aws_cost.deployment(aws_cost.STEPS_PROJECT) as d:
        d.front.platform.start("signals", {"n": n}, id="signals-run")
        d.settle(args.cold)
        items: dict[str, int] = {}
        original = d.meter._after

        def counting(http_response, parsed, model, context, **kw):  # type: ignore[no-untyped-def]
            if model.name in ("Query", "GetItem", "BatchGetItem"):
                got = parsed.get("Items") or ([parsed["Item"]] if "Item" in parsed else [])
                for page in parsed.get("Responses", {}).values():
                    got = list(got) + list(page)
                items[d.meter.phase] = items.get(d.meter.phase, 0) + len(got)
            original(http_response, parsed, model, context, **kw)

        d.meter._after = counting  # type: ignore[method-assign]
        for c in (d.front, d.worker):
            c.store._db.meta.events.unregister("after-call.dynamodb", original)
            c.store._db.meta.events.register("after-call.dynamodb", counting)
        worst = 0.0
        for i in range(1, n + 1):
            phase = f"signal {i}"
            with d.meter.measuring(phase):
                d.front.platform.signal("signals-run", "go", {"i": i})
                d.settle(args.cold)
            s = d.sums(phase)
            worst = max(worst, s.rru)
            if i == 1 or i % args.every == 0:
                print(f"  {i:>7} {s.requests:>6} {s.rru:>7.1f} {items.get(phase, 0):>11} {s.wru:>6.1f}")
        run = d.run("signals-run")
        if run.status != "completed" or run.result != {"got": n * (n + 1) // 2}:
            raise SystemExit(f"the signals run ended {run.status}: {run.error}")
        first = d.sums("signal 1").rru
        print(f"  highest RRU for one signal: {worst:.1f} (the 1st: {first:.1f})")


if __name__ == "__main__":
    main()

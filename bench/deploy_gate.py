"""How many in-flight runs the deploy gate replays per second (issue 29, point 1).

    python3 bench/deploy_gate.py [--runs 400] [--threads 1,4,16]

Parks N runs (awaiting a signal after two steps) on an AwsPlatform (moto server on
loopback, so each journal read is an HTTP round trip as on DynamoDB), then runs the gate's
check (``runtime.platform.check.check_in_flight``, what functions/gate.py calls) with the
new code loaded read-only, at each thread count, and prints runs checked per second and the
runs one gate invocation would check in its 870 s. moto is slower per call than DynamoDB
and this machine's 2 cores are shared: read the figures as a floor.
Not a test: it prints figures and exits 0.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime.aws.contract import GATE_MARGIN_S, GATE_TIMEOUT_S  # noqa: E402
from runtime.aws.runtime import AwsRuntime  # noqa: E402
from runtime.platform.check import check_in_flight  # noqa: E402
from runtime.testing import AwsPlatform  # noqa: E402

CODE = """
workflow "order" (function(wf, input)
    wf:step("reserve", function() return 1 end)
    wf:step("charge", function() return 2 end)
    return wf:await("paid", { timeout = "72h" })
end)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--threads", default="1,4,16")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "shop"
        project.mkdir()
        (project / "main.lua").write_text(CODE, encoding="utf-8")
        with AwsPlatform(project, data_dir=Path(tmp) / "aws") as p:
            for i in range(args.runs):
                p.start("order", {}, id=f"o-{i}")
            checking = AwsRuntime(replace(p.config, project=str(project)), p.new_clients(), read_only=True)
            budget = GATE_TIMEOUT_S - GATE_MARGIN_S
            print(f"{args.runs} runs parked at await 'paid' (4 journal entries each), moto server")
            for threads in (int(t) for t in args.threads.split(",")):
                began = time.perf_counter()
                report = check_in_flight(
                    checking.platform.new_worker,
                    checking.store,
                    deadline=time.monotonic() + budget,
                    threads=threads,
                )
                took = time.perf_counter() - began
                rate = len(report.verdicts) / took
                print(
                    f"threads {threads:>2}: {len(report.verdicts)} checked in {took:.2f} s ({report.passes} "
                    f"pass(es)): {rate:.0f} runs/s, about {rate * budget:,.0f} runs per gate invocation"
                )


if __name__ == "__main__":
    main()

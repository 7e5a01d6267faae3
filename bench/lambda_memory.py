"""A Lambda container's memory: the handler process, and a Lua state filled to its bound.

    python3 bench/lambda_memory.py [--bound 256] [--json]

Each figure comes from a fresh process from the source tree, with network connections
refused: it imports the handlers (``functions.fetch``, ``functions.worker``,
``functions.console``), builds the container's runtime (``functions._runtime.runtime()``:
botocore clients, the DynamoDB store, the Platform loading examples/auction's Lua), reads
its peak resident memory (VmHWM), then fills a Lua state bounded at ``--bound`` MiB with one
shape of data until Lua refuses more, and reads the peak again. lupa counts the bytes Lua
asks for; malloc rounds each block up, so a state at its bound takes more than its bound,
most for many small blocks. The shapes: 1,000-byte strings, short strings in an array,
short string keys, and a chain of one-element tables (the most measured overhead).

Printed beside each: what ``infra/memory.py`` reserves for the process and one state
(``RUNTIME_MB`` and ``STATE_SHARE`` times the bound; ``VALUES_MB`` is kept apart for values
in Python), and whether the peak stays within it; then the memory the stack gives the
functions for this bound. Differences from Lambda: this machine's CPython (Lambda's is 3.12
on arm64) and allocator, and no Lambda runtime client (which ``RUNTIME_MB`` rounds up for).
Not a test: it prints figures and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from coldstart import ENV  # noqa: E402

from infra import memory  # noqa: E402

SHAPES = {
    "1,000-byte strings": "local t, s = {}, string.rep('x', 1000) for i = 1, 1e9 do t[i] = s .. i end",
    "short strings in an array": "local t = {} for i = 1, 1e9 do t[i] = 'k' .. i end",
    "short string keys": "local t = {} for i = 1, 1e9 do t['k' .. i] = true end",
    "a chain of one-element tables": "local x = nil for i = 1, 1e9 do x = {x} end",
}

CHILD = """
import json, re, socket, sys
def refuse(*a, **k):
    raise OSError("the memory bench makes no network calls")
socket.socket.connect = refuse
socket.create_connection = refuse
def peak_mib():
    with open("/proc/self/status") as f:
        return int(re.search(r"VmHWM:\\s+(\\d+)", f.read()).group(1)) / 1024
sys.path.insert(0, sys.argv[1])
import functions.fetch, functions.worker, functions.console
from functions import _runtime
rt = _runtime.runtime()
assert rt.platform.code.workflows, "the project loaded no workflow"
base = peak_mib()
from lupa import lua54
from runtime.engine.sandbox import Sandbox
sandbox = Sandbox(max_memory=int(sys.argv[2]) * 2**20)
sandbox._arm()
try:
    sandbox.lua.execute(sys.argv[3])
except lua54.LuaMemoryError:
    pass
finally:
    sandbox._lift()
used = sandbox.lua.get_memory_used() / 2**20
print(json.dumps({"base_mib": base, "peak_mib": peak_mib(), "used_mib": used}))
"""


def measure(bound_mib: int, code: str) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LUNAFLOW_"))}
    env.update(ENV)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT), str(bound_mib), code],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the measuring process failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--bound", type=int, default=256, help="the Lua state's bound in MiB (limits.memory_mb)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if args.bound < 1:  # lupa takes 0 as no bound: the state would fill the machine
        parser.error("--bound is a whole number of MiB from 1")
    reserved = memory.RUNTIME_MB + float(memory.STATE_SHARE) * args.bound
    figures = {name: measure(args.bound, code) for name, code in SHAPES.items()}
    function_mb = memory.function_memory_mb(args.bound * memory.MiB)
    if args.json:
        print(
            json.dumps(
                {
                    "bound_mib": args.bound,
                    "reserved_mib": reserved,
                    "function_mb": function_mb,
                    "shapes": figures,
                }
            )
        )
        return
    print(f"a Lua state bounded at {args.bound} MiB, filled in a handler process (VmHWM, MiB)")
    print(
        f"reserved for the process and one state: {memory.RUNTIME_MB} + {float(memory.STATE_SHARE):g} x "
        f"{args.bound} = {reserved:.0f} MiB (infra/memory.py; {memory.VALUES_MB} more for values in Python)"
    )
    for name, f in figures.items():
        over = f["peak_mib"] - f["base_mib"]
        verdict = "within" if f["peak_mib"] <= reserved else "OVER"
        print(
            f"  {name:<32} process {f['base_mib']:6.1f}, with the state {f['peak_mib']:7.1f} "
            f"(the state {over:6.1f}: {over / args.bound:4.2f} x its bound): {verdict}"
        )
    print(f"the functions' memory for this bound: {function_mb} MB (at least {memory.FLOOR_MB})")


if __name__ == "__main__":
    main()

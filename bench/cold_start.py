"""Cold start from the built Lambda bundle: its size, and each handler's import and first
activation in a fresh process, run from the bundle folder as Lambda runs it.

    python3 bench/cold_start.py [--bundle DIR] [--against OLD_DIR] [--trials 5]

Without ``--bundle`` it builds the bundle exactly as ``cdk synth`` does (``infra.bundling``,
from infra/bundle.lock, with examples/auction) into a temporary folder; ``--bundle`` takes
one already built (e.g. the ``asset.*`` folder under cdk.out); ``--against`` measures another
bundle (an older revision's) in the same run, trial by trial. Printed: the bundle's size
and file count (botocore and lupa apart); then, per handler (fetch, worker, console), the
medians over fresh processes of importing the handler module and of the first activation
(``functions._runtime.runtime()``: boto3 clients, the DynamoDB store, the Platform loading
the project's Lua), with the heaviest top-level packages from ``python -X importtime``.

As on Lambda, the bundle holds no bytecode and none is written (``-B``): every module is
compiled from source in each process. Differences from Lambda: this machine's CPython and
architecture; lupa's compiled module is this machine's build (the bundle's is for aarch64),
imported first, then everything else comes from the bundle and the standard library alone.
Network connections are refused, so no figure includes an AWS call. Not a test: it prints figures and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from coldstart import ENV as SOURCE_TREE_ENV  # noqa: E402

HANDLERS = ("fetch", "worker", "console")
# The environment the stack sets, as bench/coldstart.py gives it (made-up resource names), with
# the bundle's project folder and, as on Lambda (Tracing.ACTIVE), Powertools' Tracer on.
ENV = {k: v for k, v in SOURCE_TREE_ENV.items() if k != "POWERTOOLS_TRACE_DISABLED"} | {
    "LUNAFLOW_PROJECT": "project",
    "AWS_LAMBDA_FUNCTION_NAME": "lunaflow-bench",
}

CHILD = """
import json, socket, sys, time
t0 = time.perf_counter()
def refuse(*a, **k):
    raise OSError("the cold-start bench makes no network calls")
socket.socket.connect = refuse
socket.create_connection = refuse
sys.path = [p for p in sys.path if p not in ("", ".")]  # the bundle comes in below, after lupa
import lupa.lua54  # this machine's build: the bundle's is for aarch64
# Then only the bundle and the standard library, as on Lambda (no site-packages of this machine).
sys.path = [sys.argv[1], *(p for p in sys.path if "-packages" not in p)]
import importlib
importlib.import_module("functions." + sys.argv[2])
t1 = time.perf_counter()
from functions import _runtime
rt = _runtime.runtime()
t2 = time.perf_counter()
assert sorted(rt.platform.code.workflows), "the project loaded no workflow"
for name, module in sys.modules.items():
    file = getattr(module, "__file__", None) or ""
    if name.split(".")[0] in ("runtime", "functions", "botocore") and not file.startswith(sys.argv[1]):
        raise SystemExit(f"{name} came from {file}, not the bundle")
print(json.dumps({"import_ms": (t1 - t0) * 1000, "first_ms": (t2 - t1) * 1000,
                  "modules": sorted(sys.modules)}))
"""


def build(folder: Path) -> Path:
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    sys.path.insert(0, str(ROOT))
    from infra import bundling, constants

    bundling.bundle(folder, ROOT / "examples" / "auction", constants.BUNDLE_LOCK)
    return folder


def size(folder: Path) -> dict[str, Any]:
    def measure(root: Path) -> tuple[float, int]:
        files = [p for p in root.rglob("*") if p.is_file()]
        return sum(p.stat().st_size for p in files) / 1e6, len(files)

    total_mb, total_files = measure(folder)
    boto_mb, boto_files = measure(folder / "botocore")
    lupa = sorted(p.name.split(".")[0] for p in (folder / "lupa").glob("*.so"))
    return {
        "mb": total_mb,
        "files": total_files,
        "botocore_mb": boto_mb,
        "botocore_files": boto_files,
        "botocore_services": len([p for p in (folder / "botocore" / "data").iterdir() if p.is_dir()]),
        "lua_builds": lupa,
    }


def run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LUNAFLOW_", "PYTHON"))}
    env.update(ENV)
    env["LAMBDA_TASK_ROOT"] = str(cwd)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=cwd, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} failed:\n{done.stderr}")
    return done


def heaviest(folder: Path, handler: str, n: int = 5) -> list[tuple[str, float]]:
    """Self import time summed per top-level package, in ms (python -X importtime)."""
    done = run([sys.executable, "-B", "-X", "importtime", "-c", CHILD, str(folder), handler], folder)
    found: dict[str, float] = {}
    for line in done.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+)\s+\|\s+(\d+)\s+\|\s*(\S+)", line)
        if m:
            root = m.group(3).split(".")[0]
            found[root] = found.get(root, 0.0) + int(m.group(1)) / 1000
    return sorted(found.items(), key=lambda kv: -kv[1])[:n]


def measure(folders: list[Path], trials: int) -> list[dict[str, Any]]:
    """Each folder's figures; trials interleave the folders (A, B, A, B...), so a load that
    comes and goes on a shared machine weighs on each alike."""
    results: list[dict[str, Any]] = [{"size": size(f), "handlers": {}} for f in folders]
    for handler in HANDLERS:
        runs: list[list[dict[str, Any]]] = [[] for _ in folders]
        for _ in range(trials):
            for i, folder in enumerate(folders):
                done = run([sys.executable, "-B", "-c", CHILD, str(folder), handler], folder)
                runs[i].append(json.loads(done.stdout))
        for i, folder in enumerate(folders):
            results[i]["handlers"][handler] = {
                "import_ms": statistics.median(r["import_ms"] for r in runs[i]),
                "first_ms": statistics.median(r["first_ms"] for r in runs[i]),
                # The fastest process: the least disturbed by other work on a shared machine.
                "best_ms": min(r["import_ms"] + r["first_ms"] for r in runs[i]),
                "modules": len(runs[i][0]["modules"]),
                "scheduler_or_console": sorted(
                    m for m in runs[i][0]["modules"] if m.startswith(("runtime.console", "runtime.aws.wake"))
                ),
                "heaviest": heaviest(folder, handler),
            }
    return results


def report(r: dict[str, Any]) -> str:
    s = r["size"]
    lines = [
        f"bundle: {s['mb']:.1f} MB unzipped, {s['files']} files; botocore {s['botocore_mb']:.1f} MB "
        f"({s['botocore_files']} files, {s['botocore_services']} service models); "
        f"Lua builds: {', '.join(s['lua_builds'])}",
    ]
    for name, h in r["handlers"].items():
        lines.append(
            f"{name:8} import {h['import_ms']:6.0f} ms, first activation {h['first_ms']:6.0f} ms, "
            f"together {h['import_ms'] + h['first_ms']:6.0f} ms (fastest {h['best_ms']:4.0f} ms); "
            f"{h['modules']} modules"
            + (f"; imports {', '.join(h['scheduler_or_console'])}" if h["scheduler_or_console"] else "")
        )
        lines.append("         heaviest: " + ", ".join(f"{p} {ms:.0f} ms" for p, ms in h["heaviest"]))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, help="a built bundle folder (default: build one)")
    parser.add_argument("--against", type=Path, help="another bundle folder to compare with, trial by trial")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folders = [args.bundle.resolve() if args.bundle else build(Path(tmp) / "bundle")]
        if args.against:
            folders.insert(0, args.against.resolve())
        results = measure(folders, args.trials)
    for folder, result in zip(folders, results, strict=True):
        print(json.dumps(result, indent=1) if args.json else f"== {folder}\n{report(result)}")
    print(f"(medians of {args.trials} fresh processes each; {time.perf_counter() - t:.0f} s in all)")


if __name__ == "__main__":
    main()

"""Lambda cold-start proxy: importing a handler and loading the auction project, in a fresh process.

    python3 bench/coldstart.py [--trials 5]

Each trial is a new Python process that does what a Lambda container's first invocation
does before it can handle an event: import the handler modules (``functions.fetch`` and
``functions.worker``: Powertools, boto3, the engine, lupa), then build the container's
runtime (``functions._runtime``: boto3 clients, the DynamoDB store, and the Platform, which
reads examples/auction and loads its scripts into a Lua state). The environment is the
one the CDK stack sets, with made-up resource names; network connections are refused in
that process, so the figure includes no AWS call (building clients and loading a project
make none). Printed: the interpreter's own start (``python -c pass``), the imports, the
runtime build (clients, then the project load), and the whole process, as medians; and
the heaviest top-level imports from ``python -X importtime``.

This machine is not Lambda (architecture, Python version and CPU share differ); the
figure is for comparing revisions. Not a test: it prints figures and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "examples/auction"

ENV = {
    "AWS_DEFAULT_REGION": "eu-west-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "LUNAFLOW_PROJECT": PROJECT,
    "LUNAFLOW_TABLE": "lunaflow-bench",
    "LUNAFLOW_WAKE_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/123456789012/lunaflow-bench-wake",
    "LUNAFLOW_WAKE_QUEUE_ARN": "arn:aws:sqs:eu-west-1:123456789012:lunaflow-bench-wake",
    "LUNAFLOW_SCHEDULER_GROUP": "lunaflow-bench",
    "LUNAFLOW_SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/lunaflow-bench-scheduler",
    "LUNAFLOW_VALUES_BUCKET": "lunaflow-bench-values",
    "POWERTOOLS_SERVICE_NAME": "lunaflow",
    "POWERTOOLS_METRICS_NAMESPACE": "lunaflow",
    "POWERTOOLS_TRACE_DISABLED": "true",
}


def child() -> None:
    t0 = time.perf_counter()
    import socket

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise OSError("the cold-start bench makes no network calls")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.create_connection = refuse  # type: ignore[assignment]
    sys.path.insert(0, str(ROOT))
    import functions.fetch  # noqa: F401
    import functions.worker  # noqa: F401

    t_imports = time.perf_counter()
    import boto3

    from functions import _runtime
    from runtime.aws.config import AwsConfig
    from runtime.aws.observe import PowertoolsObserver
    from runtime.aws.runtime import AwsRuntime, Clients
    from runtime.platform.platform import Platform

    spans = {"project": 0.0}
    original = Platform.__init__

    def timed(self: Platform, *args: Any, **kwargs: Any) -> None:
        t = time.perf_counter()
        try:
            original(self, *args, **kwargs)
        finally:
            spans["project"] += time.perf_counter() - t

    Platform.__init__ = timed  # type: ignore[method-assign]
    t1 = time.perf_counter()
    clients = Clients.from_session(boto3.session.Session())
    t_clients = time.perf_counter()
    rt = AwsRuntime(
        AwsConfig.from_env(), clients, observer=PowertoolsObserver(_runtime.logger, _runtime.metrics)
    )
    _runtime._runtime = rt
    t_runtime = time.perf_counter()
    workflows = sorted(rt.platform.code.workflows)
    if workflows != ["pay-sale", "settle-sale", "unpaid-report"]:
        raise SystemExit(f"the auction project loaded as {workflows}")
    print(
        json.dumps(
            {
                "imports_ms": (t_imports - t0) * 1000,
                "clients_ms": (t_clients - t1) * 1000,
                "runtime_ms": (t_runtime - t_clients) * 1000,
                "project_ms": spans["project"] * 1000,
                "ready_ms": (t_runtime - t0) * 1000,
                "ready_at": time.time(),
            }
        )
    )


_spawned = [0.0]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LUNAFLOW_"))}
    env.update(ENV)
    env["PYTHONDONTWRITEBYTECODE"] = "0"
    return env


def _wall(cmd: list[str]) -> tuple[float, str, str]:
    t = time.perf_counter()
    spawned = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT, env=_env())
    wall = (time.perf_counter() - t) * 1000
    _spawned[0] = spawned
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    return wall, out.stdout, out.stderr


def top_imports(n: int = 8) -> list[tuple[str, float]]:
    """Import time of the handler modules by package: the self time of every module
    imported, summed per top-level package (so nothing is counted twice), in ms."""
    _, _, err = _wall([sys.executable, "-X", "importtime", "-c", "import functions.fetch, functions.worker"])
    found: dict[str, float] = {}
    for line in err.splitlines():
        m = re.match(r"import time:\s+(\d+)\s+\|\s+(\d+)\s+\|\s*(\S+)", line)
        if m:
            root = m.group(3).split(".")[0]
            found[root] = found.get(root, 0.0) + int(m.group(1)) / 1000
    return sorted(found.items(), key=lambda kv: -kv[1])[:n]


def measure(trials: int, log: Any = print) -> dict[str, Any]:
    # One unmeasured run first, so .pyc files exist as they do in a deployed bundle.
    _wall([sys.executable, str(Path(__file__).resolve()), "--child"])
    bare = [_wall([sys.executable, "-c", "pass"])[0] for _ in range(trials)]
    runs = []
    for _ in range(trials):
        wall, out, _ = _wall([sys.executable, str(Path(__file__).resolve()), "--child"])
        figures = json.loads(out.strip().splitlines()[-1])
        figures["process_ms"] = wall
        figures["spawn_to_ready_ms"] = (figures["ready_at"] - _spawned[0]) * 1000
        runs.append(figures)

    def med(key: str) -> float:
        return float(statistics.median(r[key] for r in runs))

    result = {
        "interpreter_ms": statistics.median(bare),
        "imports_ms": med("imports_ms"),
        "clients_ms": med("clients_ms"),
        "runtime_ms": med("runtime_ms"),
        "project_ms": med("project_ms"),
        "ready_ms": med("ready_ms"),
        "process_ms": med("process_ms"),
        "spawn_to_ready_ms": med("spawn_to_ready_ms"),
        "trials": trials,
        "top_imports": top_imports(),
    }
    log(
        f"  cold start: interpreter {result['interpreter_ms']:.0f} ms + ready {result['ready_ms']:.0f} ms "
        f"(spawn to ready {result['spawn_to_ready_ms']:.0f} ms)"
    )
    return result


def table(r: dict[str, Any]) -> str:
    lines = [
        f"interpreter start (python -c pass):                      {r['interpreter_ms']:7.1f} ms",
        f"import functions.fetch, functions.worker:                {r['imports_ms']:7.1f} ms",
        f"build the runtime: boto3 clients                         {r['clients_ms']:7.1f} ms",
        f"build the runtime: store, waker, services, auction load  {r['runtime_ms']:7.1f} ms",
        f"  of which the Platform (read the project, load its Lua): {r['project_ms']:6.1f} ms",
        f"from the first line of the process to ready:              {r['ready_ms']:6.1f} ms",
        f"cold-start proxy, from spawning the process to ready:     {r['spawn_to_ready_ms']:6.1f} ms",
        f"(medians of {r['trials']} fresh processes; "
        f"the whole process with its exit: {r['process_ms']:.0f} ms)",
        "import time by package (python -X importtime, self times summed): "
        + ", ".join(f"{name} {ms:.0f} ms" for name, ms in r["top_imports"]),
    ]
    return "\n".join(lines)


def plot(r: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parts = [
        ("interpreter start", r["interpreter_ms"], "#a0aec0"),
        ("handler imports", r["imports_ms"], "#2b6cb0"),
        ("boto3 clients", r["clients_ms"], "#dd6b20"),
        ("auction project load", r["project_ms"], "#38a169"),
    ]
    rest = r.get("spawn_to_ready_ms", 0.0) - sum(ms for _, ms, _ in parts)
    parts.append(
        ("the rest (process start beyond `python -c pass`, runtime objects)", max(0.0, rest), "#718096")
    )
    fig, ax = plt.subplots(figsize=(8, 2.2))
    left = 0.0
    for label, ms, color in parts:
        ax.barh([0], [ms], left=left, color=color, label=f"{label} {ms:.0f} ms")
        left += ms
    ax.set_yticks([])
    ax.set_xlabel("ms")
    ax.set_title(
        f"Lambda cold-start proxy: {r['spawn_to_ready_ms']:.0f} ms from spawning a process to a ready handler"
    )
    ax.legend(fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.4))
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child()
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--plot", type=Path, default=None, help="write the bar to this PNG")
    a = ap.parse_args()
    result = measure(a.trials)
    print()
    print(table(result))
    if a.plot is not None:
        plot(result, a.plot)


if __name__ == "__main__":
    main()

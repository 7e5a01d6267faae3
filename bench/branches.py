"""Branches that run at once (issue 27.2): ten branches, each making a one-second object
call, finish in about a second, not ten, locally and through AwsPlatform.

    python3 bench/branches.py [--n 10] [--trials 3]

``fan`` maps over ``n`` items with ``wf:map`` (a child run each, all started at once);
``serial`` makes the same calls one after another in one run. Each is timed from the start
to the run's completion:

- ``LocalPlatform`` and ``AwsPlatform``, the object a Python stand-in that sleeps a second,
  with ``workers=1`` (woken runs advance one after another) and ``workers=n`` (at once: on
  AWS, the worker function advances a batch's wakes on threads, as the stack deploys it,
  ``LUNAFLOW_WAKE_THREADS=10``). Each is timed again with calls that take no time: the
  platform's own cost, which on AwsPlatform is mostly the moto server answering one request
  at a time (on AWS, DynamoDB answers the branches' requests at once). What the calls add
  is the difference;
- a real ``lunaflow dev`` (``--workers n``), the object a Lua object whose HTTP call to a
  local server is answered after a second, the run started over HTTP and polled with
  ``lunaflow show``.

Not a test: it prints figures and exits 0.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime.testing import AwsPlatform, LocalPlatform  # noqa: E402

PROJECT = ROOT / "bench" / "projects" / "branches"
CALL_S = 1.0
SERVING = re.compile(rb"serving .* on http://127\.0\.0\.1:(\d+)")


def harness_once(kind: str, workflow: str, n: int, workers: int, call_s: float = CALL_S) -> float:
    def slow_object(cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        time.sleep(call_s)
        return [args[1]]

    make = {"local": LocalPlatform, "aws": AwsPlatform}[kind]
    with make(PROJECT, objects=slow_object, workers=workers) as p:
        t0 = time.perf_counter()
        run = p.start(workflow, {"n": n, "url": "unused"}, id=f"{workflow}-1")
        took = time.perf_counter() - t0
        assert run.status.value == "completed", (run.status, run.error)
        assert run.result == list(range(1, n + 1)), run.result
        return took


class SlowServer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the handler's name
        time.sleep(CALL_S)
        n = self.path.rsplit("=", 1)[-1]
        body = n.encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


def dev_once(workflow: str, n: int, workers: int, root: Path, slow_url: str, trial: int) -> float:
    data = root / f"data-{workflow}-{workers}-{trial}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "dev", str(PROJECT), "--port", "0", "--data", str(data),
         "--workers", str(workers), "--no-reload", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        port = None
        deadline = time.time() + 30
        while port is None and time.time() < deadline:
            line = proc.stdout.readline()
            m = SERVING.search(line)
            if m:
                port = int(m.group(1))
        assert port is not None, "lunaflow dev did not start"
        threading.Thread(target=lambda: proc.stdout.read() if proc.stdout else None, daemon=True).start()
        body = json.dumps({"n": n, "url": slow_url, "id": f"{workflow}-1"}).encode()
        t0 = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(
                f"POST /{workflow} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + body
            )
            s.recv(65536)
        while True:
            shown = subprocess.run(
                [sys.executable, "-m", "runtime.cli", "show", f"{workflow}-1", "--json", "-p", str(PROJECT),
                 "--data", str(data)],
                capture_output=True, text=True, env=env,
            )  # fmt: skip
            if shown.returncode == 0 and json.loads(shown.stdout)["run"]["status"] == "completed":
                return time.perf_counter() - t0
            if time.perf_counter() - t0 > 60:
                raise RuntimeError(f"{workflow} did not complete: {shown.stdout} {shown.stderr}")
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


def line(label: str, figures: list[float]) -> str:
    listed = ", ".join(f"{f:.2f}" for f in figures)
    return f"  {label:<48} median {statistics.median(figures):6.2f} s   ({listed})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    n = args.n
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs; Python {platform.python_version()}")
    print(f"{n} branches, each a {CALL_S:.0f} s object call; {args.trials} trials each\n")
    results: dict[str, float] = {}
    for kind in ("local", "aws"):
        name = {"local": "LocalPlatform", "aws": "AwsPlatform"}[kind]
        print(name)
        for workflow, workers in (("serial", 1), ("fan", 1), ("fan", n)):
            figures = [harness_once(kind, workflow, n, workers) for _ in range(args.trials)]
            label = f"{workflow} (wf:map)" if workflow == "fan" else f"{workflow} (one run, steps in a row)"
            print(line(f"{label}, workers={workers}", figures))
            results[f"{kind} {workflow} {workers}"] = statistics.median(figures)
        bare = [harness_once(kind, "fan", n, n, call_s=0.0) for _ in range(args.trials)]
        print(line(f"fan (wf:map), workers={n}, calls taking no time", bare))
        results[f"{kind} bare"] = statistics.median(bare)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SlowServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/slow"
    print("lunaflow dev (a Lua object calling a server that answers after a second)")
    with tempfile.TemporaryDirectory(prefix="lunaflow-bench-branches-") as root:
        for workflow, workers in (("serial", n), ("fan", n)):
            figures = [dev_once(workflow, n, workers, Path(root), url, t) for t in range(args.trials)]
            label = f"{workflow} (wf:map)" if workflow == "fan" else f"{workflow} (one run, steps in a row)"
            print(line(f"{label}, --workers {workers}", figures))
            results[f"dev {workflow} {workers}"] = statistics.median(figures)
    server.shutdown()
    print()
    for where in ("local", "aws", "dev"):
        fan = results[f"{where} fan {n}"]
        serial = results[f"{where} serial {1 if where != 'dev' else n}"]
        calls = fan - results.get(f"{where} bare", 0.0)
        verdict = "meets" if calls <= 1.5 * CALL_S else "misses"
        bare = f", of which the calls {calls:.2f} s" if f"{where} bare" in results else ""
        faster = f"{serial / fan:.1f}x faster than in a row"
        print(f"target ({where}): {n} branches' calls take about {CALL_S:.0f} s, not {n * CALL_S:.0f}: "
              f"{fan:.2f} s in all{bare} ({faster}), {verdict} target")  # fmt: skip


if __name__ == "__main__":
    main()

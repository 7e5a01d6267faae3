"""A Lambda container in a process of its own, for the tests that kill one (issue 15.3).

    python -m tests.support.aws_container PROJECT DATA ENDPOINT --gate block|kill --marker FILE
        [--start WORKFLOW RUN_ID] [--advance DURATION]

It opens ``AwsPlatform`` on the deployment kept in DATA (on the moto server at ENDPOINT),
optionally starts a run, and moves its fake clock; the runs' step bodies call the
``Gate`` object (every other object is real), which writes MARKER (the step id, a line per
call) and then, with
``block``, waits for a minute (the test SIGKILLs the process meanwhile), or with ``kill``
SIGKILLs the process itself: an invocation that ended mid-step, as a Lambda timeout, an out
of memory or a crashed runtime ends one.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("project")
    parser.add_argument("data")
    parser.add_argument("endpoint")
    parser.add_argument("--gate", choices=["block", "kill"], required=True)
    parser.add_argument("--marker", required=True)
    parser.add_argument("--start", nargs=2)
    parser.add_argument("--advance")
    args = parser.parse_args()

    def gate(cls: str, key: str, method: str, call: list[Any]) -> list[Any]:
        if cls != "Gate":
            raise NotStubbed  # every other object is the real one
        with open(args.marker, "a", encoding="utf-8") as out:
            out.write(f"{call[1]}\n")
            out.flush()
            os.fsync(out.fileno())
        if args.gate == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)
        return ["unreachable"]

    from runtime.platform.standins import NotStubbed
    from runtime.testing import AwsPlatform

    p = AwsPlatform(args.project, data_dir=args.data, endpoint_url=args.endpoint, objects=gate)
    if args.start:
        p.start(args.start[0], {}, id=args.start[1])
    if args.advance:
        p.advance(args.advance)


def spawn(
    project: Path, data: Path, endpoint: str, gate: str, marker: Path, *more: str
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.aws_container",
            str(project),
            str(data),
            endpoint,
            "--gate",
            gate,
            "--marker",
            str(marker),
            *more,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_for_lines(marker: Path, count: int, timeout_s: float = 60.0) -> list[str]:
    """The step ids the gate has written, once there are ``count`` (bounded wait)."""
    give_up = time.monotonic() + timeout_s
    while time.monotonic() < give_up:
        lines = marker.read_text(encoding="utf-8").split() if marker.exists() else []
        if len(lines) >= count:
            return lines
        time.sleep(0.05)
    raise TimeoutError(f"the container did not write {marker} {count} time(s) within {timeout_s:.0f}s")


if __name__ == "__main__":
    main()

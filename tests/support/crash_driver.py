"""A lunaflow process for tests/dev_server/test_crash.py: opens LocalPlatform on a data folder,
starts (or joins) one run of tests/projects/crash_effect, and drives it until idle.

    python crash_driver.py --data DIR --effects FILE --flag FILE --events FILE \
        --run ID [--input JSON] [--advance 1m]

The ``objects`` stand-in ``Ledger(key):record(step_id)`` appends the step id to
``--effects`` (flushed and fsynced) and then, if the ``--flag`` file exists, hangs:
  flag text ``step:<suffix>``  hang in any record() whose step id ends with <suffix>
            (``step:`` alone hangs in every one);
  flag text ``idle``           after the start returns, hang with the run parked.
Milestones go to ``--events`` as JSON lines ({"event": "opened"|"started"|"done", ...})
so the test can tell how far the process got; the test kills it with SIGKILL.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from runtime.testing import LocalPlatform  # noqa: E402

PROJECT = ROOT / "tests" / "projects" / "crash_effect"


def hang() -> None:
    while True:  # until SIGKILL
        time.sleep(3600)


def flag_text(flag: Path) -> str | None:
    try:
        return flag.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None


def append_line(path: Path, line: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


class Ledger:
    def __init__(self, effects: Path, flag: Path) -> None:
        self.effects = effects
        self.flag = flag

    def __call__(self, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        if (cls, method) != ("Ledger", "record"):
            raise RuntimeError(f"unexpected call {cls}({key!r}):{method}")
        step_id = str(args[0])
        append_line(self.effects, step_id)
        text = flag_text(self.flag)
        if text is not None and text.startswith("step:") and step_id.endswith(text[len("step:") :]):
            hang()
        return [True]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--effects", required=True, type=Path)
    ap.add_argument("--flag", required=True, type=Path)
    ap.add_argument("--events", required=True, type=Path)
    ap.add_argument("--run", required=True)
    ap.add_argument("--input", default='{"amount": 25}')
    ap.add_argument("--advance", default="1m")
    a = ap.parse_args()

    def event(name: str, **fields: Any) -> None:
        append_line(a.events, json.dumps({"event": name, "pid": os.getpid(), **fields}))

    with LocalPlatform(PROJECT, data_dir=a.data, objects=Ledger(a.effects, a.flag)) as p:
        # Opening recovers: runs left mid-activation by a killed process advance again here.
        runs = p.runs()
        event("opened", status={r.id: r.status for r in runs})
        run = p.start("charge", json.loads(a.input), id=a.run)  # joins the run if it exists
        event("started", status=run.status)
        if flag_text(a.flag) == "idle":
            hang()
        p.advance(a.advance)
        run = p.get(a.run)
        event("done", status=run.status, result=run.result, error=run.error)


if __name__ == "__main__":
    main()

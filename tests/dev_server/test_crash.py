"""A real crash: a lunaflow process is killed with SIGKILL inside a step body, after the
body's effect happened but before its result was recorded, and a second process on the
same data folder finishes the run.

The process is tests/support/crash_driver.py running tests/projects/crash_effect; its
``objects`` stand-in appends ``wf.step_id`` to a file (the effect) and hangs when a flag
file says so. Every wait is bounded, so a broken engine fails the test instead of
hanging CI.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.core.journal import Kind
from runtime.store.sqlite import STORE_FILE, SQLiteStore

DRIVER = Path(__file__).resolve().parents[1] / "support" / "crash_driver.py"
ROOT = DRIVER.parents[2]
WAIT_S = 30.0  # generous bound for a process to reach a point (lupa start-up included)


@dataclass
class Setup:
    tmp: Path

    @property
    def data(self) -> Path:
        return self.tmp / "data"

    @property
    def effects(self) -> Path:
        return self.tmp / "effects.txt"

    @property
    def flag(self) -> Path:
        return self.tmp / "hang.flag"

    @property
    def events(self) -> Path:
        return self.tmp / "events.jsonl"

    def args(self, run_id: str, order: dict[str, Any]) -> list[str]:
        return [
            sys.executable,
            str(DRIVER),
            "--data",
            str(self.data),
            "--effects",
            str(self.effects),
            "--flag",
            str(self.flag),
            "--events",
            str(self.events),
            "--run",
            run_id,
            "--input",
            json.dumps(order),
        ]

    def lines(self) -> list[str]:
        if not self.effects.exists():
            return []
        return self.effects.read_text(encoding="utf-8").splitlines()

    def event_list(self) -> list[dict[str, Any]]:
        if not self.events.exists():
            return []
        return [json.loads(x) for x in self.events.read_text(encoding="utf-8").splitlines() if x]

    def journal(self, run_id: str) -> list[Any]:
        store = SQLiteStore(self.data / STORE_FILE)
        try:
            return store.journal(run_id)
        finally:
            store.close()

    def status(self, run_id: str) -> str | None:
        store = SQLiteStore(self.data / STORE_FILE)
        try:
            run = store.get_run(run_id)
            return None if run is None else run.status
        finally:
            store.close()


def spawn(s: Setup, run_id: str, order: dict[str, Any], name: str) -> subprocess.Popen[bytes]:
    out = open(s.tmp / f"{name}.out", "wb")  # noqa: SIM115 - closed with the process
    err = open(s.tmp / f"{name}.err", "wb")  # noqa: SIM115
    proc = subprocess.Popen(s.args(run_id, order), cwd=ROOT, stdout=out, stderr=err)
    out.close()
    err.close()
    return proc


def stderr_of(s: Setup, name: str) -> str:
    path = s.tmp / f"{name}.err"
    return path.read_text(encoding="utf-8", errors="replace")[-3000:] if path.exists() else ""


def wait_until(
    s: Setup, proc: subprocess.Popen[bytes], name: str, what: str, cond: Callable[[], bool]
) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if cond():
            return
        if proc.poll() is not None:
            raise AssertionError(
                f"{name} exited ({proc.returncode}) before {what}; stderr:\n{stderr_of(s, name)}"
            )
        time.sleep(0.01)
    raise AssertionError(f"{name} did not reach {what} within {WAIT_S}s; stderr:\n{stderr_of(s, name)}")


def sigkill(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=WAIT_S)
    assert proc.returncode == -signal.SIGKILL


def run_to_end(s: Setup, run_id: str, order: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """Start a process that does not hang, wait for it to exit, return its events."""
    before = len(s.event_list())
    proc = spawn(s, run_id, order, name)
    try:
        rc = proc.wait(timeout=WAIT_S * 2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=WAIT_S)
    assert rc == 0, f"{name} failed ({rc}); stderr:\n{stderr_of(s, name)}"
    return s.event_list()[before:]


def intents(journal: list[Any], step: str) -> list[str]:
    return [e.data["step_id"] for e in journal if e.kind == Kind.STEP_INTENT and e.name == step]


def test_sigkill_between_effect_and_result_reruns_the_body_with_the_same_step_id(tmp_path: Path) -> None:
    """Seed: "A step records its result after the body returns, so a crash in between
    leaves the platform unable to know whether the effect happened." / `wf.step_id` across
    "a crash between the effect and its recorded result: stays the same, so the repeat is
    recognised." SPEC 5: "Killed at any instant and started again, it resumes every run.\""""
    s = Setup(tmp_path)
    run_id, order = "crash-1", {"amount": 25}
    s.flag.write_text("step:", encoding="utf-8")
    first = spawn(s, run_id, order, "first")
    try:
        wait_until(s, first, "first", "the effect", lambda: len(s.lines()) >= 1)
        sigkill(first)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=WAIT_S)
    assert s.lines() == [f"{run_id}/charge/1/1"]
    # "Each step ... is journaled before it takes effect": the intent is on disk, the
    # result is not.
    journal = s.journal(run_id)
    assert intents(journal, "charge") == [f"{run_id}/charge/1/1"]
    assert not [e for e in journal if e.kind == Kind.STEP_RESULT]
    assert s.status(run_id) == "running"

    s.flag.unlink()
    events = run_to_end(s, run_id, order, "second")

    # The second process finished the run while opening, before its own start call.
    assert events[0]["event"] == "opened" and events[0]["status"] == {run_id: "completed"}
    assert events[-1]["event"] == "done" and events[-1]["status"] == "completed"
    assert events[-1]["result"] == {"receipt": f"receipt:{run_id}/charge/1/1", "amount": 25}
    # The body ran again, naming the same effect.
    assert s.lines() == [f"{run_id}/charge/1/1", f"{run_id}/charge/1/1"]
    journal = s.journal(run_id)
    assert intents(journal, "charge") == [f"{run_id}/charge/1/1"]
    # The second start of the attempt is journaled before its body runs (issue 14, point 6).
    assert [(e.kind, e.data.get("start")) for e in journal] == [
        (Kind.STARTED, None),
        (Kind.STEP_INTENT, None),
        (Kind.STEP_RERUN, 2),
        (Kind.STEP_RESULT, None),
        (Kind.COMPLETED, None),
    ]


def test_step_id_changes_after_a_recorded_failure_and_holds_across_a_sigkill(tmp_path: Path) -> None:
    """`wf.step_id` across "a retry after a recorded failure: changes, because that attempt
    is a new effect" (…/1/1 then …/1/2) and across "a crash between the effect and its
    recorded result: stays the same" (…/1/2 again after SIGKILL and restart)."""
    s = Setup(tmp_path)
    run_id, order = "crash-2", {"amount": 7, "fail_first": True}
    s.flag.write_text("step:/1/2", encoding="utf-8")  # attempt 1 raises; attempt 2 hangs
    first = spawn(s, run_id, order, "first")
    try:
        wait_until(s, first, "first", "attempt 2's effect", lambda: len(s.lines()) >= 2)
        sigkill(first)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=WAIT_S)
    assert s.lines() == [f"{run_id}/charge/1/1", f"{run_id}/charge/1/2"]
    journal = s.journal(run_id)
    assert intents(journal, "charge") == [f"{run_id}/charge/1/1", f"{run_id}/charge/1/2"]
    failed = [e for e in journal if e.kind == Kind.STEP_FAILED]
    assert [(f.data["attempt"], f.data["error"], f.data["final"]) for f in failed] == [
        (1, "card declined", False)
    ]

    s.flag.unlink()
    events = run_to_end(s, run_id, order, "second")

    assert events[-1]["status"] == "completed", events[-1]
    assert events[-1]["result"] == {"receipt": f"receipt:{run_id}/charge/1/2", "amount": 7}
    assert s.lines() == [f"{run_id}/charge/1/1", f"{run_id}/charge/1/2", f"{run_id}/charge/1/2"]
    assert intents(s.journal(run_id), "charge") == [f"{run_id}/charge/1/1", f"{run_id}/charge/1/2"]


def test_step_id_of_the_retry_is_new_when_killed_while_parked_in_backoff(tmp_path: Path) -> None:
    """The recorded failure survives a SIGKILL while the run waits out its backoff: the
    next process runs attempt 2 as a new effect (…/1/2), not attempt 1 again. Seed: "A
    parked run holds no resources. It is journal rows and a timer.\""""
    s = Setup(tmp_path)
    run_id, order = "crash-3", {"amount": 9, "fail_first": True}
    s.flag.write_text("idle", encoding="utf-8")  # hang after start returns, run parked
    first = spawn(s, run_id, order, "first")
    try:
        wait_until(
            s,
            first,
            "first",
            "the parked run",
            lambda: any(e["event"] == "started" for e in s.event_list()),
        )
        assert [e["status"] for e in s.event_list() if e["event"] == "started"] == ["sleeping"]
        sigkill(first)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=WAIT_S)
    assert s.lines() == [f"{run_id}/charge/1/1"]

    s.flag.unlink()
    events = run_to_end(s, run_id, order, "second")

    assert events[0]["status"] == {run_id: "sleeping"}  # still in its backoff when reopened
    assert events[-1]["status"] == "completed", events[-1]
    assert events[-1]["result"] == {"receipt": f"receipt:{run_id}/charge/1/2", "amount": 9}
    assert s.lines() == [f"{run_id}/charge/1/1", f"{run_id}/charge/1/2"]


INTERRUPTED = "step 'charge' attempt 1 was interrupted 3 times: the process running it ended"


def test_an_attempt_that_always_ends_its_process_fails_after_three_interruptions(tmp_path: Path) -> None:
    """Issue 14, point 6; SPEC 6: "An attempt interrupted because the process running it
    ended is re-run with the same step id; after 3 interruptions it is recorded as failed
    ... then backoff and retries apply as usual." Attempt 1's body is killed inside its
    effect three times (each start journaled); the fourth process records the attempt as
    failed without running it, waits out the backoff and runs attempt 2 as a new effect.
    Before: the body ran again at every start, without end."""
    s = Setup(tmp_path)
    run_id, order = "doomed", {"amount": 3}
    s.flag.write_text("step:/1/1", encoding="utf-8")  # attempt 1 hangs until killed, every time
    for start in range(1, 4):
        proc = spawn(s, run_id, order, f"start{start}")
        try:
            wait_until(s, proc, f"start{start}", f"effect {start}", lambda n=start: len(s.lines()) >= n)
            sigkill(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=WAIT_S)
    assert s.lines() == [f"{run_id}/charge/1/1"] * 3

    last = spawn(s, run_id, order, "start4")
    try:
        wait_until(s, last, "start4", "a fourth effect", lambda: len(s.lines()) >= 4)
        assert s.lines()[3] != f"{run_id}/charge/1/1", "attempt 1's body ran a fourth time"
        assert last.wait(timeout=WAIT_S) == 0, stderr_of(s, "start4")
    finally:
        if last.poll() is None:
            last.kill()
            last.wait(timeout=WAIT_S)
    events = s.event_list()
    assert events[-1]["status"] == "completed", events[-1]
    assert events[-1]["result"] == {"receipt": f"receipt:{run_id}/charge/1/2", "amount": 3}
    assert s.lines() == [f"{run_id}/charge/1/1"] * 3 + [f"{run_id}/charge/1/2"]
    journal = s.journal(run_id)
    assert [(e.kind, e.data.get("start")) for e in journal if e.kind.startswith("step.")] == [
        (Kind.STEP_INTENT, None),
        (Kind.STEP_RERUN, 2),
        (Kind.STEP_RERUN, 3),
        (Kind.STEP_FAILED, None),
        (Kind.STEP_INTENT, None),
        (Kind.STEP_RESULT, None),
    ]
    failed = next(e for e in journal if e.kind == Kind.STEP_FAILED)
    assert (failed.data["attempt"], failed.data["error"], failed.data["final"]) == (1, INTERRUPTED, False)

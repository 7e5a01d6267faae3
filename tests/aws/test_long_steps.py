"""Issue 15.3: a step longer than its invocation, and an invocation that dies mid-step.

On main the worker's timeout was 300 s, a step's timeout was only checked between commands,
and a worker killed mid-step left a lease that held the run for about 16 minutes while each
wake bounced as ``busy`` every 2 s; then the same attempt ran again, forever. Now the worker
has Lambda's 15 minutes, a step runs only in time it fits (a timeout over 14 minutes is
refused), a step without a timeout gets what is left, invocations heartbeat their leases so
a dead one frees its run seconds later, and a busy wake waits for its holder.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.aws.contract import Handler
from runtime.aws.invocation import LONGEST_STEP_MS, SAFETY_S, SAVE_S
from runtime.aws.motoserver import MotoServer
from runtime.core.journal import Kind
from runtime.engine.executor import ActivationDeadline
from runtime.testing import AwsPlatform
from tests.support.aws_container import spawn, wait_for_lines

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_limits"
BOUNDED_WAIT_S = 30.0


class Gate:
    """The ``Gate`` object stand-in: records each call's step id and the function that ran
    it; ``hold`` makes calls wait until ``open`` (bounded)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Handler]]] = []
        self.p: AwsPlatform | None = None
        self.entered = threading.Event()
        self.released = threading.Event()
        self.released.set()

    def hold(self) -> None:
        self.released.clear()

    def open(self) -> None:
        self.released.set()

    def __call__(self, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        assert self.p is not None
        self.calls.append((str(args[1]), list(self.p.invoking)))
        self.entered.set()
        assert self.released.wait(BOUNDED_WAIT_S), "the gate was never opened"
        return ["through"]


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
def p(gate: Gate) -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT, objects=gate) as platform:
        gate.p = platform
        yield platform
    gate.open()


def intents(p: AwsPlatform, run_id: str) -> list[str]:
    return [e.data["step_id"] for e in p.journal(run_id) if e.kind == Kind.STEP_INTENT]


# --- a step runs only in time it fits -----------------------------------------------------


def test_a_step_timeout_computed_at_run_time_over_14_minutes_fails_the_run_without_an_attempt(
    p: AwsPlatform, gate: Gate
) -> None:
    """A timeout no invocation can give is refused (the deploy-time check catches those
    written in the scripts, tests/infra/test_wake_path.py): the run fails, resumable, with
    no attempt spent; on main the step ran."""
    run = p.start("bounded", {"timeout": "20m"}, id="t20")
    assert run.status == "failed"
    assert run.error is not None
    assert "step 'timed' has timeout 1200000ms, more than the 840000ms a step may run" in run.error
    assert intents(p, "t20") == [] and gate.calls == []


def test_a_step_timeout_of_14_minutes_runs(p: AwsPlatform, gate: Gate) -> None:
    assert p.start("bounded", {"timeout": "14m"}, id="t14").status == "completed"
    assert len(gate.calls) == 1


def test_a_step_that_does_not_fit_the_time_left_waits_for_a_fresh_invocation(
    p: AwsPlatform, gate: Gate
) -> None:
    """An invocation with 21 s left gives a step 16 s: a step with an 18 s timeout is not
    started there (no intent, no attempt spent) but in the next invocation, which has the
    whole 15 minutes. On main it ran in the invocation with too little time."""
    p.platform.start("bounded", {"timeout": "18s"}, id="t18")
    short = SAFETY_S + 1
    assert p.deliver(p.config.wake_queue_url, p.config.wake_queue_arn, Handler.WORKER, short) == 1
    assert gate.calls == [] and intents(p, "t18") == []
    assert p.get("t18").status == "running"
    p.settle()  # the wake it sent reaches a fresh (full-length) invocation
    assert p.get("t18").status == "completed"
    assert intents(p, "t18") == ["t18/timed/1/1"] and len(gate.calls) == 1


def test_a_step_without_a_timeout_is_stopped_at_the_end_of_the_invocation_and_runs_again(
    p: AwsPlatform,
) -> None:
    """The executor's deadline, as the worker builds it (steps until its end, less the time
    to save): a step without a timeout that spins 3 s, started with 0.8 s left, is stopped
    there instead of running past the end of the invocation. Nothing is recorded for the
    cut attempt (as if the invocation had been killed): the run is woken, and a fresh
    invocation runs the attempt again with the same step id (a ``step.rerun`` entry), where
    it has the time to complete."""
    p.platform.start("unbounded", {"spin": 3}, id="u1")
    now = time.monotonic()
    p.platform.advance(
        "u1",
        deadline=ActivationDeadline(at=now + 60, steps_until=now + 0.8, longest_step_ms=LONGEST_STEP_MS),
    )
    assert time.monotonic() - now < 2.5
    assert p.get("u1").status == "running"
    assert [e.kind for e in p.journal("u1")] == [Kind.STARTED, Kind.STEP_INTENT]
    p.settle()
    assert p.get("u1").status == "completed"
    kinds = [e.kind for e in p.journal("u1")]
    assert kinds == [Kind.STARTED, Kind.STEP_INTENT, Kind.STEP_RERUN, Kind.STEP_RESULT, Kind.COMPLETED]


def test_the_worker_gives_a_step_until_the_invocation_ends_less_the_time_to_save() -> None:
    """The numbers the worker plans by: Lambda's 900 s, no new work in the last 20 s, a step
    may run until 5 s before the end; the longest step timeout leaves a fresh invocation 40 s
    to reach the step."""
    assert (SAFETY_S, SAVE_S) == (20.0, 5.0)
    assert LONGEST_STEP_MS == 14 * 60_000 < (900 - SAFETY_S) * 1000


def test_the_fetch_function_hands_a_started_run_to_the_runner(p: AwsPlatform, gate: Gate) -> None:
    """A route that starts a run answers at once; the step body runs in the runner's
    invocation (the worker's code, its 900 s), never inside the fetch function's 29 s."""
    response = p.fetch("POST", "/hold/f1")
    assert response.status_code == 202
    assert [functions for _, functions in gate.calls] == [[Handler.RUNNER]]


# --- leases: heartbeats, dead invocations, busy wakes --------------------------------------


def test_a_killed_invocation_frees_its_run_within_two_minutes_and_the_attempt_runs_again(
    tmp_path: Path,
) -> None:
    """A container SIGKILLed inside a step: its lease dies with its heartbeat, the
    reconciler finds the wake-up it never released, and the same attempt runs again with
    the same step id (so the effect can be recognised). On main the lease held the run for
    16 minutes."""
    endpoint = MotoServer.shared().endpoint
    marker = tmp_path / "gate"
    child = spawn(PROJECT, tmp_path / "data", endpoint, "block", marker, "--start", "hold", "k1")
    try:
        [first] = wait_for_lines(marker, 1)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=BOUNDED_WAIT_S)
    gate = Gate()
    with AwsPlatform(PROJECT, data_dir=tmp_path / "data", endpoint_url=endpoint, objects=gate) as p:
        gate.p = p
        assert p.get("k1").status == "running"
        p.advance("2m")  # the reconcile rule's run after the wake-up is a minute old
        assert p.get("k1").status == "awaiting"
        assert [step_id for step_id, _ in gate.calls] == [first] == ["k1/held/1/1"]
        assert intents(p, "k1") == ["k1/held/1/1"]


def test_an_attempt_that_kills_its_invocation_three_times_is_recorded_as_failed(tmp_path: Path) -> None:
    """SPEC 6: "after 3 interruptions it is recorded as failed: step 'name' attempt N was
    interrupted 3 times: the process running it ended". Three containers in turn die in the
    step (each reconcile backs off: they find it 2, 5 and 9 minutes on); a fourth finds the
    attempt counted out."""
    endpoint = MotoServer.shared().endpoint
    marker, data = tmp_path / "gate", tmp_path / "data"
    runs = [("--start", "hold", "x1"), ("--advance", "3m"), ("--advance", "6m")]
    for n, more in enumerate(runs, start=1):
        child = spawn(PROJECT, data, endpoint, "kill", marker, *more)
        try:
            wait_for_lines(marker, n)
        finally:
            child.wait(timeout=BOUNDED_WAIT_S)
    with AwsPlatform(PROJECT, data_dir=data, endpoint_url=endpoint, objects=lambda *a: ["through"]) as p:
        p.advance("10m")
        assert len(marker.read_text(encoding="utf-8").split()) == 3
        run = p.get("x1")
        assert run.status == "failed"
        assert "step 'held' attempt 1 was interrupted 3 times: the process running it ended" in (
            run.error or ""
        )


def test_a_busy_wake_waits_for_its_holder_instead_of_bouncing(p: AwsPlatform, gate: Gate) -> None:
    """A signal for a run another (live) invocation is working on: its wake comes back after
    10 s, 20 s, 40 s... while the holder beats, and the holder, done, prompts the run for the
    signal it did not see. On main the wake came back every 2 s (30 times a minute)."""
    holder = p.container(p.project, owner="holder")
    gate.hold()
    p.platform.start("hold", {}, id="b1")
    worker = threading.Thread(
        target=p.deliver,
        args=(p.config.wake_queue_url, p.config.wake_queue_arn, Handler.WORKER, 900, holder),
        daemon=True,
    )
    worker.start()
    assert gate.entered.wait(BOUNDED_WAIT_S)
    sends: list[str] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        if '"run_id":"b1"' in params.get("MessageBody", ""):
            sends.append(params["MessageBody"])

    p.clients.sqs.meta.events.register("before-parameter-build.sqs.SendMessage", count)
    assert p.signal("b1", "go", {"by": "ada"}) is True
    p.advance("60s")
    assert p.get("b1").status == "running"  # still the holder's
    busy = [s for s in sends if '"reason":"busy"' in s]
    assert 1 <= len(busy) <= 3, sends
    gate.open()
    worker.join(BOUNDED_WAIT_S)
    assert not worker.is_alive()
    p.settle()
    run = p.get("b1")
    assert run.status == "completed"
    assert run.result == {"got": "through", "payload": {"by": "ada"}}


def test_an_object_call_cut_off_by_a_killed_invocation_frees_its_key_within_seconds(tmp_path: Path) -> None:
    """A container killed inside an object method leaves the key's lock behind; the lock is
    renewed only while a call runs, so it is free 10 s on (found by the AWS torture run: on
    main the lock held for 60 s and the next caller gave up as busy after 10)."""
    endpoint = MotoServer.shared().endpoint
    marker = tmp_path / "gate"
    child = spawn(PROJECT, tmp_path / "data", endpoint, "block", marker, "--start", "spinner", "s1")
    try:
        wait_for_lines(marker, 1)  # inside Slow("key"):spin, holding the key's lock
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=BOUNDED_WAIT_S)
    with AwsPlatform(PROJECT, data_dir=tmp_path / "data", endpoint_url=endpoint) as p:
        p._move_clock(int(p.now * 1000) + 11_000)  # past the dead call's last renewal
        began = time.monotonic()
        answer = p.fetch("GET", "/slow")
        assert (answer.status_code, answer.body) == (200, "0")  # the cut-off call changed nothing
        assert time.monotonic() - began < 5

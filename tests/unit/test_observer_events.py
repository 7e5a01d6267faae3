"""The ``Observer`` seam (runtime/engine/observe.py) carries what a terminal needs, from the
engine itself (issue 17, point 2): a failed attempt's step id and error, the retry's attempt
and due time, a failure's error and the user's traceback, and cancels (children included).
A recording observer on a real Platform over SQLite, on a fake clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.clock import FakeClock
from runtime.platform.platform import Platform
from runtime.store.sqlite import STORE_FILE, SQLiteStore


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def started(self, run_id: str, workflow: str) -> None:
        self.events.append(("started", {"run": run_id}))

    def activation(self, run_id: str, workflow: str) -> None:
        pass

    def activation_ended(self, run_id: str, workflow: str) -> None:
        pass

    def step_started(self, run_id: str, workflow: str, step: str, attempt: int) -> None:
        pass

    def step(
        self,
        run_id: str,
        workflow: str,
        step: str,
        attempt: int,
        ok: bool,
        *,
        step_id: str = "",
        error: str | None = None,
    ) -> None:
        self.events.append(
            (
                "step",
                {"run": run_id, "step": step, "attempt": attempt, "ok": ok, "id": step_id, "error": error},
            )
        )

    def retry(
        self, run_id: str, workflow: str, step: str, *, attempt: int = 0, retry_at: float | None = None
    ) -> None:
        self.events.append(("retry", {"run": run_id, "step": step, "attempt": attempt, "at": retry_at}))

    def signal_resumed(self, run_id: str, workflow: str, latency_s: float) -> None:
        pass

    def ended(
        self,
        run_id: str,
        workflow: str,
        status: str,
        *,
        error: str | None = None,
        traceback: str | None = None,
    ) -> None:
        self.events.append(
            ("ended", {"run": run_id, "status": status, "error": error, "traceback": traceback})
        )

    def cancelled(self, run_id: str, workflow: str) -> None:
        self.events.append(("cancelled", {"run": run_id}))


MAIN = """
workflow "flaky" (function(wf)
    wf:step("boom", { retries = 2, backoff = "5s" }, function() error("kaboom " .. wf.step_id, 0) end)
end)
workflow "crash" (function(wf)
    local t = nil
    return t.x
end)
workflow "parent" (function(wf)
    wf:step("spawn", function() workflows "child":start(nil, { id = wf.id .. "-child" }) end)
    wf:await("never")
end)
workflow "child" (function(wf) wf:await("never") end)
"""


@pytest.fixture
def world(
    make_project: Callable[[dict[str, str]], Path], tmp_path: Path
) -> Iterator[tuple[Platform, Recorder, FakeClock]]:
    clock, recorder = FakeClock(), Recorder()
    platform = Platform(
        make_project({"main.lua": MAIN}), SQLiteStore(tmp_path / STORE_FILE), clock, observer=recorder
    )
    try:
        yield platform, recorder, clock
    finally:
        platform.close()


def test_a_failed_attempt_carries_its_step_id_and_error_and_the_retry_its_time(
    world: tuple[Platform, Recorder, FakeClock],
) -> None:
    platform, rec, clock = world
    platform.start("flaky", None, id="f")
    platform.run_until_idle()
    clock.advance(5)
    platform.run_until_idle()
    steps = [e for kind, e in rec.events if kind == "step"]
    assert [(s["attempt"], s["ok"], s["id"], s["error"]) for s in steps] == [
        (1, False, "f/boom/1/1", "kaboom f/boom/1/1"),
        (2, False, "f/boom/1/2", "kaboom f/boom/1/2"),
    ]
    [retry] = [e for kind, e in rec.events if kind == "retry"]
    assert retry == {"run": "f", "step": "boom", "attempt": 2, "at": 1_767_225_605.0}
    [ended] = [e for kind, e in rec.events if kind == "ended"]
    assert (
        ended["status"] == "failed"
        and ended["error"] == "step 'boom' failed after 2 attempts: kaboom f/boom/1/2"
    )


def test_a_raising_workflow_function_ends_with_the_users_traceback(
    world: tuple[Platform, Recorder, FakeClock],
) -> None:
    platform, rec, _ = world
    platform.start("crash", None, id="c")
    platform.run_until_idle()
    [ended] = [e for kind, e in rec.events if kind == "ended"]
    assert ended["error"] == "main.lua:7: attempt to index a nil value (local 't')"
    assert ended["traceback"].splitlines() == ["stack traceback:", "\tmain.lua:7: in function <main.lua:5>"]


def test_cancelling_a_parent_reports_the_parent_and_its_child(
    world: tuple[Platform, Recorder, FakeClock],
) -> None:
    platform, rec, _ = world
    platform.start("parent", None, id="p")
    platform.run_until_idle()
    platform.cancel("p")
    assert [e["run"] for kind, e in rec.events if kind == "cancelled"] == ["p", "p-child"]

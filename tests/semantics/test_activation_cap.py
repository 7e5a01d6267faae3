"""The end of an activation's time for step attempts (``Platform.advance(deadline=...)``,
``ActivationDeadline.steps_until``, ``Executor.advance``):
what a Lambda invocation running out of time does to the attempt it is running (issue 14,
point 6, "a Lambda running out of time"; the interface issue 15 builds on)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from runtime.core.journal import Kind, Status
from runtime.engine.executor import ActivationDeadline
from runtime.testing import LocalPlatform
from tests.support.stress import slow_upstream

PROJECT = r"""
local function spin(seconds)
  local start = os.clock()
  while os.clock() - start < seconds do end
end
object "Fetcher" { get = function(self, url) return http.get(url).status end }

workflow "long" (function(wf, input)
  return wf:step("spin", { retries = 2 }, function()
    if input.url then return objects("Fetcher")("x"):get(input.url) end
    spin(input.spin)
    return "spun"
  end)
end)

workflow "short-timeout" (function(wf, input)
  return wf:step("spin", { timeout = "100ms" }, function() spin(2) end)
end)
"""


def test_an_attempt_cut_at_the_cap_records_nothing_and_reruns_in_the_next_activation(
    make_project: Callable[..., Path], tmp_path: Path
) -> None:
    """An attempt still running at the cap is stopped there, nothing is recorded for it and
    the run is woken; the next activation re-runs it with the same step id (a step.rerun
    entry), and it completes."""
    with LocalPlatform(make_project({"main.lua": PROJECT}), data_dir=tmp_path / "d") as p:
        p.platform.start("long", {"spin": 3.0}, id="l1")
        t0 = time.monotonic()
        # The cap leaves the load and the step's intent most of a second on a loaded machine.
        p.platform.advance("l1", deadline=ActivationDeadline(t0 + 0.8, t0 + 0.8))
        assert time.monotonic() - t0 < 2.5  # cut at the cap, not after the 3 s spin
        run = p.get("l1")
        assert run.status == Status.RUNNING
        assert [e.kind for e in p.journal("l1")] == [Kind.STARTED, Kind.STEP_INTENT]
        assert "l1" in [w[0] for w in p.platform.store.wakeups()]
        p.settle()
        run = p.get("l1")
        assert run.status == Status.COMPLETED and run.result == "spun"
        kinds = [(e.kind, e.data.get("step_id") or e.data.get("start")) for e in p.journal("l1")]
        assert kinds == [
            (Kind.STARTED, None),
            (Kind.STEP_INTENT, "l1/spin/1/1"),
            (Kind.STEP_RERUN, 2),
            (Kind.STEP_RESULT, None),
            (Kind.COMPLETED, None),
        ]


def test_the_cap_bounds_a_host_call_made_by_the_attempt(
    make_project: Callable[..., Path], tmp_path: Path
) -> None:
    """An HTTP call made through an object from the attempt gets at most the time to the
    cap: the activation ends within a fraction of a second of it, not after the upstream's
    8 s."""
    with (
        slow_upstream(8.0) as upstream,
        LocalPlatform(make_project({"main.lua": PROJECT}), data_dir=tmp_path / "d") as p,
    ):
        p.platform.start("long", {"url": upstream.url("/slow")}, id="l2")
        t0 = time.monotonic()
        p.platform.advance("l2", deadline=ActivationDeadline(t0 + 0.8, t0 + 0.8))
        assert time.monotonic() - t0 < 4.0  # not the upstream's 8 s
        assert p.get("l2").status == Status.RUNNING
        assert [e.kind for e in p.journal("l2")] == [Kind.STARTED, Kind.STEP_INTENT]


def test_a_step_timeout_before_the_cap_is_a_recorded_timeout(
    make_project: Callable[..., Path], tmp_path: Path
) -> None:
    """The earlier of the two wins: a step timeout that falls before the cap fails the
    attempt with the usual timeout error."""
    with LocalPlatform(make_project({"main.lua": PROJECT}), data_dir=tmp_path / "d") as p:
        p.platform.start("short-timeout", None, id="t1")
        t0 = time.monotonic()
        p.platform.advance("t1", deadline=ActivationDeadline(t0 + 5, t0 + 5))
        run = p.get("t1")
        assert run.status == Status.FAILED
        assert run.error == "step 'spin' failed after 1 attempts: step 'spin' timed out after 100ms"

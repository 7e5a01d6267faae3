"""`pairs` and `next` in run code walk a replay-stable order, or refuse (issue 14, point 10).

``p.restart()`` builds a fresh Lua state (a new hash seed, a fresh heap), as a new process
would, and the parked runs replay in it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.core.journal import Status
from runtime.testing import LocalPlatform

# A step body (it runs once; replay skips it) that leaves the heap fragmented, so objects
# created after it get addresses in another order than in a fresh state.
CHURN = """
  wf:step("churn", function()
    local keep = {}
    for round = 1, 50 do
      local junk = {}
      for i = 1, 2000 do junk[i] = { id = i } end
      for i = 1, 2000, 7 do keep[#keep + 1] = junk[i] end
    end
    string.KEEP = keep
    return 1
  end)
"""

ORDER_PROJECT = (
    """
local NAMES = { "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
  "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango" }

workflow "by-next" (function(wf, input)
  local t = { [true] = 1, [2.5] = 1, [-3] = 1 }
  for _, n in ipairs(NAMES) do t[n] = true end
  local order, k = {}, next(t)
  while k ~= nil do order[#order + 1] = tostring(k):sub(1, 2); k = next(t, k) end
  wf:step("n-" .. table.concat(order), function() return 1 end)
  wf:await("go")
  return table.concat(order, ",")
end)

workflow "by-table-keys" (function(wf, input)
"""
    + CHURN
    + """
  local t, ids = {}, {}
  for i = 1, 20 do t[{ id = i }] = true end
  for key in pairs(t) do ids[#ids + 1] = key.id end
  wf:step("t-" .. table.concat(ids, "."), function() return 1 end)
  wf:await("go")
  return "done"
end)

workflow "by-function-keys" (function(wf, input)
"""
    + CHURN
    + """
  local t, ids = {}, {}
  for i = 1, 20 do t[function() return i end] = i end
  for _, i in pairs(t) do ids[#ids + 1] = i end
  wf:step("f-" .. table.concat(ids, "."), function() return 1 end)
  wf:await("go")
  return "done"
end)

workflow "next-of-table-keys" (function(wf, input)
  local t = { [{}] = 1 }
  local k = next(t)
  return "walked"
end)
"""
)

RUNS = 4


def _replay_after_restart(project: Path, data: Path, workflow: str) -> list[tuple[str, str, str]]:
    """Start RUNS runs (each parks on an await), restart, signal them; -> (status before,
    status after, error) per run."""
    out = []
    with LocalPlatform(project, data_dir=data, synchronous="OFF") as p:
        before = [p.start(workflow, None, id=f"r{i}") for i in range(RUNS)]
        p.restart()
        for i, run in enumerate(before):
            if run.status == Status.AWAITING:
                p.signal(f"r{i}", "go")
            after = p.get(f"r{i}")
            out.append((run.status, after.status, after.error or run.error or ""))
    return out


def test_next_in_run_code_walks_a_replay_stable_order(
    make_project: Callable[..., Path], tmp_path: Path
) -> None:
    """Raw `next` over 20 string keys (and a boolean and two numbers) names a step after the
    order it walks; the runs park and replay in a fresh Lua state. Every run completes, with
    booleans first, then numbers, then strings, each by value. Before: `next` walked the
    per-state hash order: `journal divergence: expected step 'n-...', code reached step 'n-...'`."""
    project = make_project({"main.lua": ORDER_PROJECT})
    results = _replay_after_restart(project, tmp_path / "d", "by-next")
    assert all(after == Status.COMPLETED for _, after, _ in results), results
    with LocalPlatform(project, data_dir=tmp_path / "d") as p:
        assert p.get("r0").result == "tr,-3,2.,al,br,ch,de,ec,fo,go,ho,in,ju,ki,li,mi,no,os,pa,qu,ro,si,ta"


@pytest.mark.parametrize("workflow", ["by-table-keys", "by-function-keys", "next-of-table-keys"])
def test_pairs_and_next_over_keys_ordered_by_address_are_refused_in_run_code(
    make_project: Callable[..., Path], tmp_path: Path, workflow: str
) -> None:
    """`pairs` or `next` over a table keyed by tables or functions (whose only order is their
    address) fails the run on its first pass, with an error that names the call and the
    fix, never a divergence after a restart. Before: pairs sorted such keys by tostring(),
    an address, and the runs diverged after a restart."""
    project = make_project({"main.lua": ORDER_PROJECT})
    results = _replay_after_restart(project, tmp_path / "d", workflow)
    for before, _after, error in results:
        assert before == Status.FAILED, results
        assert "pairs/next over a table with a" in error and "is refused in the workflow function" in error, (
            error
        )
        assert "divergence" not in error


def test_pairs_in_handlers_and_step_bodies_still_walks_any_key(make_project: Callable[..., Path]) -> None:
    """The refusal is for the workflow function only: a fetch handler and a step body walk
    tables keyed by tables as Lua does (a body's values are recorded, so its order is not
    replayed)."""
    project = make_project(
        {
            "main.lua": """
workflow "w" (function(wf, input)
  return wf:step("s", function()
    local n = 0
    for k in pairs({ [{}] = 1, [{}] = 2 }) do n = n + 1 end
    return n
  end)
end)
on "fetch" (function(request)
  local n = 0
  for k in pairs({ [{}] = 1, [print] = 2 }) do n = n + 1 end
  return { status_code = 200, body = tostring(n) }
end)
"""
        }
    )
    with LocalPlatform(project) as p:
        assert p.start("w", None, id="w1").result == 2
        assert p.fetch("GET", "/").body == "2"

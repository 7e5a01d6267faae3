"""A misspelt option is refused by name, on the waits and on the kv and queue calls, as it is
on wf:step, wf:child, wf:map and start. It was ignored: `{ timeot = "1h" }` left a wait
waiting for ever, `{ tll = "1h" }` a value that never expired."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Status

MakeProject = Callable[[dict[str, str]], Path]
MAIN = """
local cache = kv "cache"
workflow "await" (function(wf) local v = wf:await("go", { timout = "1h" }); return v end)
workflow "race" (function(wf) local v = wf:race({ "a", "b" }, { within = "2h" }); return v end)
workflow "all" (function(wf) local v = wf:all({ "a", "b" }, { timeot = "1h" }); return v end)
workflow "all-ok" (function(wf) return wf:all({ "a" }, { timeout = "1h", within = "2h" }) end)
workflow "put" (function(wf)
  return wf:step("put", function() cache:put("t", 1, { tll = "1h" }) end)
end)
workflow "list" (function(wf)
  return wf:step("list", function() return #cache:list({ prefx = "t" }) end)
end)
workflow "send" (function(wf)
  return wf:step("send", function() queue "emails":send({}, { dealy = "5s" }) end)
end)
on "queue" ("emails", function(msg) end)
workflow "tail" (function(wf) return wf:await("go", { timout = "1h" }) end)
workflow "nest" (function(wf)
  return wf:step("outer", function() return wf:step("inner", function() end) end)
end)
workflow "continue-in-step" (function(wf)
  return wf:step("x", function() return wf:continue_as_new({}) end)
end)
"""


@pytest.fixture
def p(harness: Any, make_project: MakeProject, tmp_path: Path) -> Any:
    with harness(make_project({"main.lua": MAIN}), data_dir=tmp_path / "data") as plat:
        yield plat


@pytest.mark.parametrize(
    ("workflow", "says"),
    [
        ("await", "main.lua:3: wf:await: unknown option 'timout'; the options are timeout, e.g."),
        ("race", "main.lua:4: wf:race: unknown option 'within'; the options are timeout, e.g."),
        ("all", "main.lua:5: wf:all: unknown option 'timeot'; the options are timeout and within, e.g."),
    ],
)
def test_a_wait_with_a_misspelt_option_fails_the_run_at_its_line(p: Any, workflow: str, says: str) -> None:
    run = p.start(workflow, id=f"{workflow}-1")
    assert run.status == Status.FAILED
    assert says in (run.error or "")
    assert "check its spelling" in (run.error or "")


def test_a_wait_with_its_options_spelt_right_waits(p: Any) -> None:
    assert p.start("all-ok", id="ok-1").status == Status.AWAITING
    p.advance("2h")
    assert p.get("ok-1").status == Status.COMPLETED


@pytest.mark.parametrize(
    ("workflow", "says"),
    [
        ("put", "kv 'cache':put: unknown option 'tll'; the options are ttl, e.g. { ttl = \"1h\" }"),
        ("list", "kv 'cache':list: unknown option 'prefx'; the options are prefix and limit"),
        ("send", "queue 'emails':send: unknown option 'dealy'; the options are delay, e.g."),
    ],
)
def test_a_kv_or_queue_call_with_a_misspelt_option_fails_its_step(p: Any, workflow: str, says: str) -> None:
    run = p.start(workflow, id=f"{workflow}-1")
    assert run.status == Status.FAILED
    assert says in (run.error or "")


@pytest.mark.parametrize(
    ("workflow", "says"),
    [
        ("tail", "wf:await: unknown option 'timout'"),
        ("nest", "steps do not nest: step 'inner' was called inside step 'outer'"),
        ("continue-in-step", "wf:continue_as_new was called inside step 'x'"),
    ],
)
def test_a_refused_tail_call_never_names_the_engines_chunk(p: Any, workflow: str, says: str) -> None:
    """`return wf:...(...)` leaves no frame of the caller's: the level the refusal named fell
    in the engine's own code, and the message read `[string "<python>"]:2045: ...`."""
    run = p.start(workflow, id=f"{workflow}-1")
    assert run.status == Status.FAILED
    assert says in (run.error or "")
    assert "<python>" not in (run.error or "") and "[string" not in (run.error or "")

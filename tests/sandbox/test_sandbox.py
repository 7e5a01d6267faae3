"""The sandbox (SPEC section 6): what user Lua can and cannot reach, and bounded calls."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.errors import ProjectLoadError
from runtime.testing import LocalPlatform

MakeProject = Callable[[dict[str, str]], Path]

PROBE = """
workflow "probe" (function(wf, input)
    return wf:step("probe", function()
        local f = load("return " .. input.expr)
        local ok, v = pcall(f)
        if not ok then return "error: " .. tostring(v) end
        return type(v) == "nil" and "nil" or tostring(v)
    end)
end)
"""


@pytest.fixture
def probe(make_project: MakeProject) -> LocalPlatform:
    p = LocalPlatform(make_project({"main.lua": PROBE}))
    yield p
    p.close()


@pytest.mark.parametrize(
    "expr",
    [
        "python",
        "io",
        "os.execute",
        "os.getenv",
        "os.remove",
        "os.exit",
        "string.dump",
        '("").dump',
        "debug",
        "package",
        "collectgarbage",
        "dofile",
        "loadfile",
    ],
)
def test_forbidden_globals_are_absent(probe: LocalPlatform, expr: str) -> None:
    result = probe.start("probe", {"expr": expr}).result
    assert result == "nil" or result.startswith("error:"), result


def test_the_string_metatable_is_hidden(probe: LocalPlatform) -> None:
    assert probe.start("probe", {"expr": 'getmetatable("")'}).result == "false"


def test_binary_chunks_are_refused(make_project: MakeProject) -> None:
    src = """
    workflow "w" (function(wf)
        return wf:step("s", function()
            local ok, err = pcall(load, "\\27Lua", "x", "b")
            return tostring(err)
        end)
    end)
    """
    with LocalPlatform(make_project({"main.lua": src})) as p:
        assert "binary chunks are refused" in p.start("w").result


def test_platform_tables_refuse_setmetatable(make_project: MakeProject) -> None:
    src = """
    workflow "w" (function(wf)
        local ok, err = pcall(setmetatable, wf, {})
        return tostring(err)
    end)
    """
    with LocalPlatform(make_project({"main.lua": src})) as p:
        assert "protected metatable" in p.start("w").result


def test_require_reaches_project_modules_only(make_project: MakeProject) -> None:
    files = {
        "lib/money.lua": "return { cents = function(x) return x * 100 end }",
        "main.lua": """
        local money = require "lib.money"
        workflow "w" (function(wf)
            local ok, err = pcall(require, "../../etc/passwd")
            local ok2, err2 = pcall(require, "os")
            return { money.cents(2), tostring(err), tostring(err2) }
        end)
        """,
    }
    with LocalPlatform(make_project(files)) as p:
        cents, outside, builtin = p.start("w").result
        assert cents == 200
        assert "module names are dotted project paths" in outside
        assert "no module os.lua in this project" in builtin


@pytest.mark.parametrize(
    "top", ["while true do end", "while true do pcall(function() while true do end end) end"]
)
def test_an_endless_loop_at_a_scripts_top_level_refuses_the_project(
    make_project: MakeProject, top: str
) -> None:
    with pytest.raises(ProjectLoadError, match="budget of .* Lua instructions"):
        LocalPlatform(make_project({"main.lua": top, "lunaflow.toml": "[limits]\ninstructions = 2000000\n"}))


def test_a_memory_bomb_at_a_scripts_top_level_refuses_the_project(make_project: MakeProject) -> None:
    bomb = "local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 1048576) .. i end"
    with pytest.raises(ProjectLoadError, match="ran out of memory"):
        LocalPlatform(make_project({"main.lua": bomb, "lunaflow.toml": "[limits]\nmemory_mb = 32\n"}))


CONTAINED = """
workflow "loop-in-run" (function(wf) while true do end end)
workflow "loop-in-step" (function(wf) wf:step("spin", function() while true do end end) end)
workflow "catch-loop" (function(wf)
    wf:step("spin", function()
        while true do pcall(function() while true do end end) end
    end)
end)
workflow "bomb-in-run" (function(wf)
    local t = {} for i = 1, 1e9 do t[i] = string.rep("x", 1048576) .. i end
end)
workflow "bomb-in-step" (function(wf)
    wf:step("bomb", function() local t = {} for i = 1, 1e9 do t[i] = string.rep("x", 1048576) .. i end end)
end)
workflow "ok" (function(wf) return wf:step("one", function() return 1 end) end)
"""


@pytest.mark.parametrize(
    ("workflow", "message"),
    [
        ("loop-in-run", "budget of 2000000 Lua instructions"),
        ("loop-in-step", "step 'spin' failed after 1 attempts: call stopped: it ran past its budget"),
        ("catch-loop", "call stopped: it ran past its budget"),
        ("bomb-in-run", "ran out of memory (the Lua state's limit is 64 MiB)"),
        ("bomb-in-step", "step 'bomb' failed after 1 attempts: call stopped: it ran out of memory"),
    ],
)
def test_runaway_run_code_fails_that_run_and_the_platform_keeps_working(
    make_project: MakeProject, workflow: str, message: str
) -> None:
    project = make_project(
        {"main.lua": CONTAINED, "lunaflow.toml": "[limits]\ninstructions = 2000000\nmemory_mb = 64\n"}
    )
    with LocalPlatform(project) as p:
        began = time.monotonic()
        run = p.start(workflow, id="bad")
        assert run.status == "failed"
        assert message in (run.error or "")
        assert time.monotonic() - began < 10
        assert p.start("ok", id="good").result == 1


def test_a_step_timeout_fails_the_attempt_within_a_second(make_project: MakeProject) -> None:
    src = """workflow "w" (function(wf)
        wf:step("spin", { timeout = "50ms" }, function() while true do end end)
    end)"""
    with LocalPlatform(make_project({"main.lua": src})) as p:
        began = time.monotonic()
        run = p.start("w")
        assert time.monotonic() - began < 10.0  # cut at the timeout (a bound, not a speed)
        assert run.error == "step 'spin' failed after 1 attempts: step 'spin' timed out after 50ms"
        failed = [e for e in p.journal(run.id) if e.kind == "step.failed"]
        assert failed[0].data["error"] == "step 'spin' timed out after 50ms"


def test_an_engine_thread_cannot_be_resumed_by_user_code(make_project: MakeProject) -> None:
    src = """
    workflow "w" (function(wf)
        local co = coroutine.running()
        local ok, err = pcall(coroutine.resume, co)
        return { tostring(co), tostring(err) }
    end)
    """
    with LocalPlatform(make_project({"main.lua": src})) as p:
        co, err = p.start("w").result
        assert co == "nil"
        assert "expects a coroutine created by this code" in err


def test_waits_inside_a_user_coroutine_still_reach_the_engine(make_project: MakeProject) -> None:
    src = """
    workflow "w" (function(wf)
        local co = coroutine.wrap(function()
            local v = wf:await("go")
            coroutine.yield(v .. "!")
        end)
        return co()
    end)
    """
    with LocalPlatform(make_project({"main.lua": src})) as p:
        assert p.start("w", id="c").status == "awaiting"
        p.signal("c", "go", "hi")
        assert p.get("c").result == "hi!"
        p.restart()
        assert p.get("c").result == "hi!"


def test_a_bare_yield_in_the_workflow_function_fails_the_run_clearly(make_project: MakeProject) -> None:
    src = 'workflow "w" (function(wf) coroutine.yield(1) end)'
    with LocalPlatform(make_project({"main.lua": src})) as p:
        assert "outside a coroutine created by this code" in (p.start("w").error or "")


def test_pairs_walks_keys_in_a_fixed_order_in_run_code(make_project: MakeProject) -> None:
    src = """
    workflow "w" (function(wf)
        local t = { zeta = 1, alpha = 2, [3] = 3, mid = 4, [1] = 5 }
        local keys = {}
        for k in pairs(t) do keys[#keys + 1] = tostring(k) end
        return table.concat(keys, ",")
    end)
    """
    with LocalPlatform(make_project({"main.lua": src})) as p:
        assert p.start("w").result == "1,3,alpha,mid,zeta"


def test_scripts_have_their_own_globals(make_project: MakeProject) -> None:
    files = {
        "a.lua": 'secret_global = 1\nworkflow "w" (function(wf) return secret_global end)',
        "b.lua": 'workflow "v" (function(wf) return secret_global == nil end)',
    }
    with LocalPlatform(make_project(files)) as p:
        assert p.start("w").result == 1
        assert p.start("v").result is True

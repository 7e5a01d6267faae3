"""Pattern matching and the guarded table/string functions, as user code meets them.

SPEC 6: "instructions per call are bounded; past the bound the call fails with a clear
error and the platform keeps serving." Lua's C pattern matcher and C library loops run
where the instruction hook cannot reach, so the sandbox routes long or risky calls
through Lua ports (runtime/engine/lua/patterns.lua, runtime/engine/lua/guards.lua). What a user sees
must not change: same results, errors worded as Lua words them and placed at the user's
line; and the worst cases are now stopped by budgets and step timeouts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runtime.testing import LocalPlatform

MakeProject = Callable[[dict[str, str]], Path]

# The probe evaluates input.code as a step body (line 1 of chunk "=probe") and returns
# "ok <results>" or "error <message>".
PROBE = """
workflow "probe" (function(wf, input)
    return wf:step("probe", { timeout = "1s" }, function()
        local f = assert(load(input.code, "=probe"))
        local r = table.pack(pcall(f))
        for i = 2, r.n do r[i] = tostring(r[i]) end
        return (r[1] and "ok " or "error ") .. table.concat(r, ",", 2, r.n)
    end)
end)
"""


@pytest.fixture
def probe(make_project: MakeProject) -> Iterator[LocalPlatform]:
    with LocalPlatform(make_project({"main.lua": PROBE})) as p:
        yield p


def run(p: LocalPlatform, code: str) -> str:
    record = p.start("probe", {"code": code})
    assert record.status == "completed", record.error
    return str(record.result)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        # Short calls take the C matcher; long subjects or many quantifiers take the port.
        ('return ("key = value"):match("^(%w+)%s*=%s*(.-)%s*$")', "ok key,value"),
        (
            'return (("x"):rep(5000) .. "key = value"):match("(%w+)%s*=%s*(%w+)$")',
            "ok " + "x" * 5000 + "key,value",
        ),
        ('return select(2, ("a,b,,c"):rep(2000):gsub(",", ";"))', "ok 6000"),
        ('local n = 0 for w in (("ab "):rep(3000)):gmatch("%a+") do n = n + 1 end return n', "ok 3000"),
        ('return ("hello"):find("l+")', "ok 3,4"),
        ('return ("THE (quick) fox"):find("%f[%a]%a+", 5)', "ok 6,10"),
        # table.concat: C for plain tables, the port through __index and __len.
        ('return table.concat({1, 2.5, "z"}, 7)', "ok 172.57z"),
        ('return table.concat({1, 2, 3}, ", ", 2)', "ok 2, 3"),
        ('return table.concat({}, "x", 3, 2)', "ok "),
        (
            "return table.concat(setmetatable({}, {__index = function(_, i) return i end, "
            '__len = function() return 3 end}), "-")',
            "ok 1-2-3",
        ),
        # Long enough strings that sort takes the Lua port (n log n x longest over 1e8 bytes).
        (
            'local t = {} for i = 1, 300 do t[i] = ("s"):rep(40000) .. (i * 7 % 300 + 1000) end '
            "table.sort(t) local ordered = true "
            "for i = 2, #t do ordered = ordered and t[i - 1] <= t[i] end "
            "return #t, ordered, t[1]:sub(-4), t[#t]:sub(-4)",
            "ok 300,true,1000,1299",
        ),
        # table.unpack: C for plain tables, the port through __index and __len.
        ("return table.unpack({1,2,3}, 2)", "ok 2,3"),
        ("return table.unpack({1,2,3}, -1, 1)", "ok nil,nil,1"),
        (
            "return table.unpack(setmetatable({}, {__index=function(_, k) return k * 2 end}), 1, 3)",
            "ok 2,4,6",
        ),
        (
            "return table.unpack(setmetatable({}, {__len=function() return 2 end, "
            "__index=function(_, k) return k end}))",
            "ok 1,2",
        ),
        ('return table.unpack("abc")', "ok nil,nil,nil"),
        ('return select("#", table.unpack({}, 1, 20000))', "ok 20000"),
        # A C comparator is called from Lua, with the same order.
        ("local t = {3, 1, 2} table.sort(t, math.ult) return table.concat(t, ',')", "ok 1,2,3"),
    ],
)
def test_patterns_give_the_results_lua_gives(probe: LocalPlatform, code: str, expected: str) -> None:
    assert run(probe, code) == expected


BAD_FIND = "bad argument #1 to 'find' (string expected, got nil)"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ('local x = ("abc"):find("%") return x', "error probe:1: malformed pattern (ends with '%')"),
        (
            'local x = ("a"):rep(5000):find("a*%") return x',
            "error probe:1: malformed pattern (ends with '%')",
        ),
        ('local x = string.find(nil, "a") return x', f"error probe:1: {BAD_FIND}"),
        ('local x = ("abc"):find(nil) return x', f"error probe:1: {BAD_FIND}"),
        (
            'local x = ("abc"):gsub("a", function() return {} end) return x',
            "error probe:1: invalid replacement value (a table)",
        ),
        (
            'local x = ("a"):rep(5000):gsub("a", function() return {} end) return x',
            "error probe:1: invalid replacement value (a table)",
        ),
        (
            "local t = {} for i = 1, 50 do t[i] = i % 7 end\ntable.sort(t, function() return true end)",
            "error probe:2: invalid order function for sorting",
        ),
        (
            "local t = setmetatable({1, 2}, {})\nlocal x = table.insert(t, 5, 1) return x",
            "error probe:2: bad argument #2 to 'insert' (position out of bounds)",
        ),
        ('local x = string.rep("x", 2^40) return x', "error probe:1: resulting string too large"),
        (
            "local x = table.concat({1, {}, 3}) return x",
            "error probe:1: invalid value (table) at index 2 in table for 'concat'",
        ),
        (
            "local t = setmetatable({1, {}}, {__len = function() return 2 end})\n"
            "local x = table.concat(t) return x",
            "error probe:2: invalid value (table) at index 2 in table for 'concat'",
        ),
        (
            "local x = table.concat({}, {}) return x",
            "error probe:1: bad argument #2 to 'concat' (string expected, got table)",
        ),
        (
            "local x = table.concat(nil) return x",
            "error probe:1: bad argument #1 to 'concat' (table expected, got nil)",
        ),
        (
            'local x = table.concat({1, 2}, "", 1.5) return x',
            "error probe:1: bad argument #3 to 'concat' (number has no integer representation)",
        ),
        ("local x = table.unpack({}, 1, 1e7) return x", "error probe:1: too many results to unpack"),
        (
            "local x = table.unpack({}, math.mininteger, math.maxinteger) return x",
            "error probe:1: too many results to unpack",
        ),
        (
            "local x = table.unpack(setmetatable({}, {__index=function() end}), 1, 2e6) return x",
            "error probe:1: too many results to unpack",
        ),
        (
            "local x = table.unpack({}, 1.5) return x",
            "error probe:1: bad argument #2 to 'unpack' (number has no integer representation)",
        ),
        ("local x = table.unpack(nil) return x", "error attempt to get length of a nil value"),
        ("local x = table.unpack(5, 1, 2) return x", "error attempt to index a number value"),
        # C's sort raises its comparison errors without a position; so does the port.
        ('table.sort({"a", 1})', "error attempt to compare number with string"),
        (
            'table.sort(setmetatable({"a", 1}, {__len = function() return 2 end}))',
            "error attempt to compare number with string",
        ),
    ],
)
def test_errors_read_as_lua_words_them_at_the_callers_line(
    probe: LocalPlatform, code: str, expected: str
) -> None:
    assert run(probe, code) == expected


@pytest.mark.parametrize(
    "body",
    [
        'return string.find(string.rep("a", 40), string.rep("a*", 20) .. "b")',
        'return string.find(string.rep("a", 200000), "a*b")',
        'return (string.rep("(", 200000):gsub("%b()", ""))',
        "return table.move({}, 1, 2^40, 1, {}) ~= nil",
        "return table.remove(setmetatable({}, { __len = function() return 2^40 // 1 end }), 1)",
    ],
)
def test_a_step_timeout_stops_what_c_would_run_for_hours(make_project: MakeProject, body: str) -> None:
    source = f"""
workflow "w" (function(wf)
    return wf:step("long", {{ timeout = "200ms" }}, function() {body} end)
end)
workflow "ok" (function(wf) return wf:step("s", function() return 1 end) end)
"""
    with LocalPlatform(make_project({"main.lua": source})) as p:
        started = time.monotonic()
        record = p.start("w")
        assert record.error == "step 'long' failed after 1 attempts: step 'long' timed out after 200ms"
        assert time.monotonic() - started < 5
        assert p.start("ok").result == 1


def test_long_patterns_leave_no_memory_behind(make_project: MakeProject) -> None:
    """A pattern's per-byte tables are cached for short patterns only: eight long ones, each
    searched once, must not keep megabytes that a later call of the same state then lacks."""
    source = """
workflow "w" (function(wf, input)
    return wf:step("s", function()
        for i = 1, 8 do
            local p = string.rep(string.char(96 + i) .. ".", 100000)
            assert(("x"):find(p) == nil)
        end
        return 1
    end)
end)
"""
    with LocalPlatform(make_project({"main.lua": source})) as p:
        lua = p.platform.worker.code.sandbox.lua
        lua.execute("collectgarbage('collect')")
        before = lua.eval("collectgarbage('count')")
        assert p.start("w").result == 1
        lua.execute("collectgarbage('collect')")
        after = lua.eval("collectgarbage('count')")
        assert after - before < 2048, f"{after - before:.0f} KiB stayed behind"

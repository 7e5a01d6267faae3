"""The guards around C library loops (runtime/engine/lua/guards.lua) behave as the C functions.

SPEC 6: "Memory per Lua state and instructions per call are bounded; past the bound the
call fails with a clear error and the platform keeps serving." A C function runs to its
end between two checks of the instruction hook, so ``string.rep``, ``table.insert``,
``remove``, ``move`` and ``sort`` are replaced by guards that run a Lua port of ltablib
whenever the loop could be long. These tests hold the guards to the C functions: same
results and same errors, whichever path a call takes. (The escape corpus shows the long
loops are now stopped: cases 075-079.)
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

import lupa.lua54 as lua54
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

SOURCE = files("runtime.engine").joinpath("lua/guards.lua").read_text(encoding="utf-8")

# Runs `op` twice in one Lua state: on plain tables with the C function, and on tables
# with an empty metatable (which sends every guard down its Lua path) with the guard.
# Returns both outcomes as comparable strings, error positions left out.
HARNESS = """
local guards = load(...)()
local function dump(ok, t, r)
  local out = {tostring(ok)}
  -- Standalone, the guards raise without a position (the prelude adds the caller's).
  if not ok then
    out[2] = (tostring(r):gsub('^%[string "<python>"%]:%d+: ', ""))
    return table.concat(out, "|")
  end
  for i = -2, 12 do out[#out + 1] = tostring(rawget(t, i)) end
  out[#out + 1] = type(r) == "table" and (r == t and "the table" or "another table") or tostring(r)
  return table.concat(out, "|")
end
return function(make, op)
  local t1 = make()
  local ok1, r1 = pcall(op, table, t1)
  local t2 = setmetatable(make(), {})
  local lib = { insert = guards.insert, remove = guards.remove, move = guards.move, sort = guards.sort }
  local ok2, r2 = pcall(op, lib, t2)
  return dump(ok1, t1, r1), dump(ok2, t2, r2)
end
"""


@pytest.fixture(scope="module")
def compare() -> Any:
    lua = lua54.LuaRuntime()
    return lua.execute(HARNESS, SOURCE), lua


def both(compare: Any, items: list[int], op: str) -> tuple[str, str]:
    fn, lua = compare
    maker = "function(...) local items = {...} return function() return {table.unpack(items)} end end"
    make = lua.eval(maker)(*items)
    return fn(make, lua.eval(f"function(table, t) {op} end"))


@pytest.mark.parametrize(
    "op",
    [
        "table.insert(t, 9)",
        "table.insert(t, 1, 9)",
        "table.insert(t, #t + 1, 9)",
        "table.insert(t, 0, 9)",
        "table.insert(t, #t + 2, 9)",
        "table.insert(t, 1.5, 9)",
        "table.insert(t, 'x', 9)",
        "table.insert(t, 1, 2, 3)",
        "table.insert(t)",
        "return table.remove(t)",
        "return table.remove(t, 1)",
        "return table.remove(t, #t + 1)",
        "return table.remove(t, #t + 2)",
        "return table.remove(t, 0)",
        "return table.remove(t, -1)",
        "return table.move(t, 1, 3, 2)",
        "return table.move(t, 2, 4, 1)",
        "return table.move(t, 1, 0, 5)",
        "return table.move(t, 1, 3, 3, {})[4]",
        "return table.move(t, 1, 3, math.maxinteger)",
        "return table.move(t, -1, math.maxinteger, 1)",
        "return table.move(t, 1, 3, 1, 'x')",
        "table.sort(t)",
        "table.sort(t, function(a, b) return a > b end)",
        "table.sort(t, 3)",
        "table.sort(t, function(a, b) return true end)",
    ],
)
def test_the_guard_matches_the_c_function(compare: Any, op: str) -> None:
    c, guard = both(compare, [5, 3, 8, 1, 9, 2, 7, 4, 6, 0, 11, 10], op)
    assert guard == c


@settings(max_examples=150, deadline=None)
@given(
    items=st.lists(st.integers(min_value=-5, max_value=5), max_size=12),
    op=st.sampled_from(
        [
            "table.sort(t)",
            "table.sort(t, function(a, b) return a > b end)",
            "table.insert(t, 1, 99)",
            "table.insert(t, (#t // 2) + 1, 99)",
            "return table.remove(t, 1)",
            "return table.remove(t)",
            "return table.move(t, 1, #t, 2)",
            "return table.move(t, 2, #t, 1)",
        ]
    ),
)
def test_the_guard_matches_the_c_function_on_any_array(compare: Any, items: list[int], op: str) -> None:
    c, guard = both(compare, items, op)
    assert guard == c


def test_string_rep_matches_c_and_answers_empty_repeats_at_once() -> None:
    lua = lua54.LuaRuntime()
    out = lua.execute(
        """
        local rep = load(...)().rep
        local cases = {
          {"ab", 3}, {"ab", 3, "-"}, {"ab", 0}, {"ab", -1}, {"", 5, ""}, {"", 5, ","}, {12, 2},
          {"x", 2.0}, {"x", 2.5}, {"x", "3"}, {nil, 1}, {"x", nil}, {"x", 2^40}, {"x", 1, {}},
        }
        local diffs = {}
        for i, c in ipairs(cases) do
          local a = table.pack(pcall(string.rep, table.unpack(c, 1, 3)))
          local b = table.pack(pcall(rep, table.unpack(c, 1, 3)))
          local sa = tostring(a[1]) .. tostring(a[2]):gsub("'[%w%.]+'", "'rep'")
          local sb = tostring(b[1]) .. tostring(b[2])
          if sa ~= sb then diffs[#diffs + 1] = i .. ": " .. sa .. " ~= " .. sb end
        end
        return table.concat(diffs, "\\n"), #rep("", math.maxinteger), #rep("", math.maxinteger, "")
        """,
        SOURCE,
    )
    assert out == ("", 0, 0)

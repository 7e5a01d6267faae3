"""What the pattern router costs: Lua's C matcher against the Lua port, call by call.

    python3 bench/patterns.py [--repeat 5]

The sandbox sends a `string.find`/`match`/`gmatch`/`gsub` call to a Lua port of the
matcher (runtime/engine/lua/patterns.lua) when its worst case is long, so that instruction
budgets and step timeouts reach it. This prints, for typical calls, which way the router
sends each and the time of the C matcher, the port and the router, so the price of
safety is a figure rather than a guess. Not a test: it asserts nothing and exits 0.
"""

from __future__ import annotations

import argparse
import sys
from importlib.resources import files
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import lupa.lua54 as lua54  # noqa: E402

CASES = [
    ("key = value line", 'local s = "name = lunaflow  "', 's:match("^(%w+)%s*=%s*(.-)%s*$")'),
    ("find a word in 1 KB", 'local s = ("lorem ipsum "):rep(85) .. "needle"', 's:find("%f[%a]needle%f[%A]")'),
    (
        "split 100 KB of CSV",
        'local s = ("alpha,beta,gamma,"):rep(6000)',
        "for _ in s:gmatch('([^,]*),') do end",
    ),
    ("trim 10 KB", 'local s = "  " .. ("x"):rep(10000) .. "  "', 's:match("^%s*(.-)%s*$")'),
    ("collapse spaces, 100 KB", 'local s = ("a  b   c "):rep(11000)', 's:gsub("%s+", " ")'),
    ("backtracking (a*)^4 b, 40 bytes", 'local s = ("a"):rep(40)', 's:find(("a*"):rep(4) .. "b")'),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5, help="runs of each call; the best is kept")
    args = ap.parse_args()
    source = files("runtime.engine").joinpath("lua/patterns.lua").read_text(encoding="utf-8")
    lua = lua54.LuaRuntime()
    timer = lua.execute(
        """
        local M = load(...)()
        local routed = M.router({})
        local libs = {
          C = string,
          port = { find = M.find, match = M.match, gmatch = M.gmatch, gsub = M.gsub },
          router = routed,
        }
        local c_find, c_match, c_gmatch, c_gsub = string.find, string.match, string.gmatch, string.gsub
        return function(setup, call, lib, repeat_)
          local saved = { string.find, string.match, string.gmatch, string.gsub }
          local use = libs[lib]
          -- Method calls go through the string metatable, i.e. the global string table.
          string.find, string.match, string.gmatch, string.gsub = use.find, use.match, use.gmatch, use.gsub
          local f = assert(load(setup .. " local t0 = os.clock() " .. call .. " return os.clock() - t0"))
          local best = math.huge
          for _ = 1, repeat_ do best = math.min(best, f()) end
          string.find, string.match, string.gmatch, string.gsub = table.unpack(saved)
          return best
        end
        """,
        source,
    )
    print("lunaflow bench/patterns.py: best of", args.repeat, "runs, milliseconds")
    print(f"{'call':36} {'C':>9} {'port':>10} {'router':>9}  router sends it to")
    for label, setup, call in CASES:
        c = timer(setup, call, "C", args.repeat) * 1e3
        port = timer(setup, call, "port", args.repeat) * 1e3
        routed = timer(setup, call, "router", args.repeat) * 1e3
        way = "C" if abs(routed - c) <= abs(routed - port) else "the port"
        print(f"{label:36} {c:9.3f} {port:10.3f} {routed:9.3f}  {way}")
    print("(the backtracking row is what the port is for: its cost grows as n^k/k! with k quantifiers;")
    print(" in C nothing can stop it, in the port the hook stops it at the budget or a step's timeout)")


if __name__ == "__main__":
    main()

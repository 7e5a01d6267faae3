"""Differential tests: the pure-Lua pattern matcher (runtime/engine/lua/patterns.lua) against the
C matcher (lstrlib.c) of the Lua 5.4 that lupa bundles.

Why: the C matcher cannot be interrupted by the instruction-count hook, so the engine
routes risky ``string.find / match / gmatch / gsub`` calls to the Lua port. That is only
invisible to workflow authors if the port behaves exactly like C: same values, same types
(integer vs float; a number subject converted to a string, even when ``gsub`` replaces
nothing, since C converts its argument in place), same number of results (``find``
returns one ``nil`` when nothing matches; an exhausted ``gmatch`` iterator returns
nothing), same calls to a ``gsub`` replacement function or ``__index``, and the same
errors.

How: the chunk is executed in a plain ``lupa.lua54.LuaRuntime`` (``encoding=None``, so
every string crosses as bytes) and returns ``{find, match, gmatch, gsub}``. A Lua helper
(``HELPER``) runs one call under ``pcall`` once with ``string.X`` and once with
``port.X``, and flattens the outcome to a list of byte strings: ``ok n=<count>`` followed by
each value tagged with its type (``%q`` for strings, ``i:`` integers, ``f:`` floats in hex),
or ``E:<message>`` for an error; for ``gmatch`` every call of the iterator (up to 1000, plus
one call after it is exhausted or has raised); then a log of every call the replacement
function received (its arguments) and every key a replacement table's ``__index`` saw.

Error messages are compared after two normalisations, applied to both sides alike:

* a leading ``chunkname:line: `` position prefix is removed (C's messages have none; the
  port raises with ``error(msg, 0)``, but may be given a position by the engine);
* in ``bad argument #k to 'NAME' (...)`` the NAME is not compared: C takes it from the
  call site (``'string.find'`` through ``pcall``, ``'find'`` for a method call) and a
  standalone port cannot know it. Everything else -- the argument number ``k`` and the
  text in parentheses -- must be identical.

Property tests draw patterns from a grammar of items (literals from a small alphabet,
``.``, every class and complement, sets with ranges / escapes / ``]`` first / ``^``,
``%b``, ``%f``, captures, position captures, back-references, ``^`` and ``$``, the four
quantifiers), raw strings over the pattern specials (for malformed patterns, whose errors
C raises lazily, only when the matcher reaches them), arguments of every type, gsub
replacements of every kind, and long patterns that cross C's recursion limit
(MAXCCALLS 200, "pattern too complex"). Subjects come from a small alphabet that includes
"\\0" and a byte >= 128 so that matches happen.

A port call that runs past an instruction budget (set with a count hook on the port side
only) is discarded as too slow to compare; it is never counted as a pass. The property
tests are derandomized (see ``HUNT`` below for a longer random hunt).

The character classes are C's ctype classes in the process locale (Python sets LC_CTYPE
from the environment; C.UTF-8 here, where no byte >= 128 is a letter); the test compares
whatever C answers in the running process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

import lupa.lua54 as lupa
import pytest
from hypothesis import HealthCheck, assume, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

ROOT = Path(__file__).resolve().parents[2]

if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "lunaflow-hypothesis")

# The property tests are derandomized (the same examples every run, so a known port
# difference marked xfail(strict=True) fails every run, not one run in three). Set
# LUNAFLOW_PATTERN_EXAMPLES=20000 to hunt with that many fresh random examples instead.
HUNT = os.environ.get("LUNAFLOW_PATTERN_EXAMPLES")
EXAMPLES = int(HUNT or "400")
PROPS = settings(
    database=None,
    derandomize=not HUNT,
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
GMATCH_LIMIT = 1000
PORT_BUDGET = 3_000_000  # instructions per port call before the example is discarded


def port_source() -> str:
    return files("runtime.engine").joinpath("lua/patterns.lua").read_text()


HELPER = r"""
local port, LIMIT, BUDGET = ...
local pack, unpack = table.pack, table.unpack
local sfmt, mtype = string.format, math.type
local STOP = setmetatable({}, {__name = "budget"})

local function ser(v)
  local t = type(v)
  if t == "string" then return sfmt("%q", v)
  elseif t == "number" then
    if mtype(v) == "integer" then return "i:" .. sfmt("%d", v) end
    return "f:" .. sfmt("%q", v)
  elseif t == "nil" or t == "boolean" then return tostring(v)
  end
  return t
end

local function errval(e)
  if e == STOP then return "budget" end
  if type(e) == "string" then return "E:" .. e end
  return "e:" .. ser(e)
end

local dec
function dec(spec, log)
  local tag = spec[1]
  if tag == "s" or tag == "i" or tag == "f" then return spec[2]
  elseif tag == "nil" then return nil
  elseif tag == "true" then return true
  elseif tag == "false" then return false
  elseif tag == "tbl" then return {}
  elseif tag == "named" then return setmetatable({}, {__name = "MyThing"})
  elseif tag == "fn" then return function() end
  elseif tag == "rtable" then
    local t = {}
    for _, kv in ipairs(spec[2]) do t[dec(kv[1], log)] = dec(kv[2], log) end
    local dflt = spec[3]
    if dflt then
      setmetatable(t, {__index = function(_, k)
        log[#log + 1] = "index " .. ser(k)
        return dec(dflt, log)
      end})
    end
    return t
  elseif tag == "rfunc" then
    local rets, i = spec[2], 0
    return function(...)
      local a = pack(...)
      local parts = {"call n=" .. a.n}
      for j = 1, a.n do parts[#parts + 1] = ser(a[j]) end
      log[#log + 1] = table.concat(parts, " ")
      i = i + 1
      local r = rets[(i - 1) % #rets + 1]
      if r[1] == "raise" then error(r[2], 0) end
      if r[1] == "none" then return end
      return dec(r, log)
    end
  end
  error("bad spec " .. tostring(tag))
end

local function run(impl, kind, argspec, nargs, guarded)
  local out, log = {}, {}
  local args = {}
  for i = 1, nargs do args[i] = dec(argspec[i], log) end
  local function emit(r)
    if r[1] then
      out[#out + 1] = "ok n=" .. (r.n - 1)
      for j = 2, r.n do out[#out + 1] = ser(r[j]) end
    else
      out[#out + 1] = errval(r[2])
    end
    return r[1]
  end
  local function call(f, ...)
    if guarded then debug.sethook(function() error(STOP, 0) end, "", BUDGET) end
    local r = pack(pcall(f, ...))
    if guarded then debug.sethook() end
    return r
  end
  if kind == "gmatch" then
    local r = call(impl.gmatch, unpack(args, 1, nargs))
    if not r[1] then
      emit(r)
    else
      local it = r[2]
      out[#out + 1] = "gmatch n=" .. (r.n - 1) .. " " .. type(it)
      for _ = 1, LIMIT do
        local c = call(it)
        if not emit(c) then
          if c[2] ~= STOP then emit(call(it)) end  -- an iterator that raised, called again
          break
        end
        if c.n == 1 or c[2] == nil then
          emit(call(it))  -- an exhausted iterator, called again
          break
        end
      end
    end
  else
    emit(call(impl[kind], unpack(args, 1, nargs)))
  end
  for _, e in ipairs(log) do out[#out + 1] = "log " .. e end
  return out
end

return function(kind, argspec, nargs)
  return run(string, kind, argspec, nargs, false), run(port, kind, argspec, nargs, true)
end
"""

_PREFIX = re.compile(rb'^E:(?:\[string ".*?"\]|[^\s:]*):\d+: ', re.S)
_ARGNAME = re.compile(rb"^E:bad argument #(\d+) to '[^']*'")


def normalise(items: Sequence[bytes]) -> list[bytes]:
    out = []
    for item in items:
        item = _PREFIX.sub(b"E:", item, count=1)
        item = _ARGNAME.sub(rb"E:bad argument #\1 to '?'", item, count=1)
        out.append(item)
    return out


def fresh(value: Any) -> Any:
    """A copy with no container shared: lupa's recursive table_from turns the second
    occurrence of a shared list or tuple into an empty table (hypothesis shares them)."""
    if isinstance(value, list | tuple):
        return [fresh(v) for v in value]
    return value


def lua_list(t: Any) -> list[bytes]:
    return [t[i] for i in range(1, len(t) + 1)]


class Oracle:
    """One LuaRuntime holding the port and the comparison helper."""

    def __init__(self) -> None:
        self.lua = lupa.LuaRuntime(encoding=None)
        self.port = self.lua.execute(port_source().encode())
        self.compare = self.lua.execute(HELPER.encode(), self.port, GMATCH_LIMIT, PORT_BUDGET)

    def outcomes(self, kind: str, args: Sequence[Any]) -> tuple[list[bytes], list[bytes]]:
        spec = self.lua.table_from(fresh(list(args)), recursive=True)
        c, p = self.compare(kind.encode(), spec, len(args))
        return normalise(lua_list(c)), normalise(lua_list(p))


_ORACLE: Oracle | None = None


def oracle() -> Oracle:
    global _ORACLE
    if _ORACLE is None:
        _ORACLE = Oracle()
    return _ORACLE


# --- value specs (decoded by HELPER's `dec`) ---------------------------------------------

ABSENT = ("absent",)  # "no value": only allowed at the end of an argument list
NIL = (b"nil",)
TRUE = (b"true",)
FALSE = (b"false",)


def S(b: bytes) -> tuple[bytes, bytes]:
    return (b"s", b)


def I(n: int) -> tuple[bytes, int]:  # noqa: E743
    return (b"i", n)


def F(x: float) -> tuple[bytes, float]:
    return (b"f", x)


def arglist(*specs: Any) -> list[Any]:
    """Trailing ABSENT arguments are left off (no value); an ABSENT before a present one
    becomes an explicit nil."""
    specs_l = list(specs)
    while specs_l and specs_l[-1] is ABSENT:
        specs_l.pop()
    return [NIL if s is ABSENT else s for s in specs_l]


def check(kind: str, args: Sequence[Any]) -> list[bytes]:
    """Assert the port's outcome equals C's; return C's (normalised) outcome."""
    c, p = oracle().outcomes(kind, args)
    if b"budget" in p:
        event("port over budget (discarded)")
        assume(False)
    assert p == c, f"string.{kind}{tuple(args)!r}: C={c!r} port={p!r}"
    return c


def c_error(outcome: list[bytes]) -> bytes | None:
    errs = [x for x in outcome if x.startswith(b"E:")]
    return errs[0][2:] if errs else None


# --- strategies ------------------------------------------------------------------------

SUBJECT_BYTES = [bytes([c]) for c in b"aaabb(). _1\x00\xe9A]z"]  # 'a' and 'b' weighted up
subjects = st.lists(st.sampled_from(SUBJECT_BYTES), max_size=10).map(b"".join)

LITERALS = [
    b"a", b"b", b"A", b"1", b"_", b" ", b"\x00", b"\xe9", b"]", b"^", b"z",
    b"%(", b"%)", b"%.", b"%%", b"%[", b"%]", b"%-", b"%*", b"%?", b"%+", b"%^", b"%$",
    b"%z", b"%\xe9", b"%\x00", b"%_",
]  # fmt: skip
CLASSES = [b"%" + bytes([c]) for c in b"acdglpsuwxzACDGLPSUWXZ"]  # %z: C 5.4 still has it
SET_ITEMS = [
    b"a", b"b", b"a-c", b"0-9", b"%d", b"%a", b"%s", b"%W", b"%]", b"%-", b"-", b"_", b".", b"(",
    b")", b"\x00", b"\xe9", b"\x80-\xff", b"\x00-\x1f", b"z-a", b"%%", b"^", b"a-", b"%a-z",
]  # fmt: skip


@st.composite
def sets(draw: st.DrawFn) -> bytes:
    neg = draw(st.sampled_from([b"", b"", b"^"]))
    first = draw(st.sampled_from([b"", b"", b"", b"]"]))
    items = draw(st.lists(st.sampled_from(SET_ITEMS), min_size=0 if first else 1, max_size=3))
    return b"[" + neg + first + b"".join(items) + b"]"


single = st.one_of(
    st.sampled_from(LITERALS),
    st.just(b"."),
    st.sampled_from(CLASSES),
    sets(),
)
quantified = st.builds(lambda a, q: a + q, single, st.sampled_from([b"", b"", b"*", b"+", b"-", b"?"]))
balance = st.builds(
    lambda x, y: b"%b" + x + y,
    st.sampled_from([b"(", b"a", b"\x00", b")"]),
    st.sampled_from([b")", b"b", b"a", b"("]),
)
frontier = st.one_of(
    st.sampled_from(
        [b"%f[%w]", b"%f[%W]", b"%f[%s]", b"%f[^\x00]", b"%f[\x00]", b"%f[a]", b"%f[%a_]", b"%f[^a]"]
    ),
    sets().map(lambda s: b"%f" + s),
)
backref = st.sampled_from([b"%1", b"%2", b"%3", b"%0"])
leaf = st.one_of(quantified, quantified, quantified, balance, frontier, backref, st.just(b"()"))
items = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=3).map(lambda xs: b"(" + b"".join(xs) + b")"),
    max_leaves=6,
)


@st.composite
def patterns(draw: st.DrawFn) -> bytes:
    body = b"".join(draw(st.lists(items, max_size=5)))
    return draw(st.sampled_from([b"", b"", b"^"])) + body + draw(st.sampled_from([b"", b"", b"$"]))


RAW_ALPHABET = [bytes([c]) for c in b"%()[]^$*+-?.ab1fb"]
raw_patterns = st.lists(st.sampled_from(RAW_ALPHABET), max_size=10).map(b"".join)
raw_subjects = st.lists(st.sampled_from([bytes([c]) for c in b"ab1()[]^$%.-\x00 "]), max_size=8).map(b"".join)

any_pattern = st.one_of(patterns(), patterns(), raw_patterns)

inits = st.one_of(
    st.just(ABSENT),
    st.just(NIL),
    st.integers(-12, 12).map(I),
    st.sampled_from([I(INT64_MAX), I(INT64_MIN), I(2**62), I(-(2**62))]),
)
plains = st.sampled_from([ABSENT, NIL, FALSE, TRUE, I(0), S(b"")])


# --- find / match / gmatch ---------------------------------------------------------------


@PROPS
@given(s=subjects, p=any_pattern, init=inits, plain=plains)
@example(s=b"aaa", p=b"", init=I(4), plain=ABSENT)
@example(s=b"aaa", p=b"", init=I(5), plain=ABSENT)
@example(s=b"a.b", p=b".", init=I(-1), plain=TRUE)
@example(s=b"a%b", p=b"%", init=ABSENT, plain=TRUE)
@example(s=b"x^a", p=b"^a", init=ABSENT, plain=I(0))
@example(s=b"a]b", p=b"a]", init=ABSENT, plain=ABSENT)
def test_find_returns_what_c_string_find_returns(s: bytes, p: bytes, init: Any, plain: Any) -> None:
    """string.find(s, p [, init [, plain]]): start, end and captures (position captures as
    integers), one nil when there is no match, init negative / zero / past the end, the
    plain flag (any truthy value), patterns without specials searched plainly, and the same
    error for a malformed pattern."""
    check("find", arglist(S(s), S(p), init, plain))


@PROPS
@given(s=subjects, p=any_pattern, init=inits)
@example(s=b"hello world", p=b"^(h)(e)()", init=ABSENT)
@example(s=b"abc", p=b"()", init=I(-1))
@example(s=b"abc", p=b"(a", init=ABSENT)
@example(s=b"abc", p=b"b)", init=ABSENT)
def test_match_returns_what_c_string_match_returns(s: bytes, p: bytes, init: Any) -> None:
    """string.match(s, p [, init]): the captures, or the whole match when there are none."""
    check("match", arglist(S(s), S(p), init))


@PROPS
@given(s=subjects, p=any_pattern, init=inits)
@example(s=b"a^a^", p=b"^a", init=ABSENT)
@example(s=b"abc", p=b"", init=ABSENT)
@example(s=b"abc", p=b"%w*", init=I(2))
@example(s=b"abc", p=b"()", init=I(9))
@example(s=b"a(b)c", p=b"%b()", init=I(-4))
def test_gmatch_iterates_like_c_string_gmatch(s: bytes, p: bytes, init: Any) -> None:
    """string.gmatch(s, p [, init]): every iteration's captures, '^' not an anchor, empty
    matches not repeated at the end of the previous match, the 5.4 init argument, errors
    raised by the iterator (not by gmatch), nothing returned once exhausted."""
    check("gmatch", arglist(S(s), S(p), init))


@PROPS
@given(kind=st.sampled_from(["find", "match", "gmatch"]), s=raw_subjects, p=raw_patterns)
@example(kind="find", s=b"x", p=b"a[")
@example(kind="find", s=b"a", p=b"a[")
@example(kind="match", s=b"b", p=b"a%")
@example(kind="match", s=b"a", p=b"a%")
@example(kind="find", s=b"]", p=b"[]]")
@example(kind="find", s=b"a", p=b"[^]a]")
@example(kind="find", s=b"-", p=b"[a-%]]")
@example(kind="find", s=b"a", p=b"%f[a")
@example(kind="gmatch", s=b"$a$", p=b"$a$")
def test_malformed_patterns_fail_where_c_fails(kind: str, s: bytes, p: bytes) -> None:
    """Random strings over the pattern specials: C reports a malformed pattern only when the
    matcher reaches the bad item, so a pattern that fails earlier is no error at all."""
    check(kind, [S(s), S(p)])


# --- classes and sets over every byte ----------------------------------------------------

CLASS_SWEEP = r"""
local port, pats = ...
local bad = {}
local function pk(...) return table.pack(pcall(...)) end
local function same(a, b)
  if a.n ~= b.n then return false end
  for i = 1, a.n do if a[i] ~= b[i] or math.type(a[i]) ~= math.type(b[i]) then return false end end
  return true
end
for _, p in ipairs(pats) do
  for c = 0, 255 do
    local ch = string.char(c)
    for _, s in ipairs({ch, "x" .. ch, ch .. ch .. "y"}) do
      local a, b = pk(string.find, s, p), pk(port.find, s, p)
      if not same(a, b) then
        bad[#bad + 1] = string.format("find(%q, %q): C %s %s %s, port %s %s %s", s, p,
          tostring(a[1]), tostring(a[2]), tostring(a[3]), tostring(b[1]), tostring(b[2]), tostring(b[3]))
        if #bad > 20 then return bad end
      end
    end
  end
end
return bad
"""


def test_every_class_and_set_matches_the_same_bytes_as_c() -> None:
    """%a %c %d %g %l %p %s %u %w %x (and %z) and their complements, alone, in sets,
    negated and in frontiers, plus set ranges (incl. bytes >= 128, "\\0", reversed ranges, ']' first),
    checked over all 256 byte values."""
    pats = []
    for cl in b"acdglpsuwxzACDGLPSUWXZ.%]":
        esc = b"%" + bytes([cl])
        pats += [esc, b"[" + esc + b"]", b"[^" + esc + b"]", b"%f[" + esc + b"]", esc + b"+"]
    pats += [
        b".", b"[\x80-\xff]", b"[\xe0-\xef]", b"[^\x80-\xff]", b"[\x00-\x1f]", b"[\x00]", b"[^\x00]",
        b"[z-a]", b"[a-]", b"[-a]", b"[]a]", b"[^]a]", b"[%]]", b"[a-%%]", b"[%a-z]", b"[a-c%d_]",
        b"[^a-c%d_]", b"%f[^\x00]", b"%f[\x00]", b"\xe9", b"[\xe9]",
    ]  # fmt: skip
    assert sweep(pats) == []


def sweep(pats: list[bytes]) -> list[str]:
    o = oracle()
    return [
        x.decode("latin-1")
        for x in lua_list(o.lua.execute(CLASS_SWEEP.encode(), o.port, o.lua.table_from(pats)))
    ]


def test_percent_z_is_the_nul_class_as_in_c() -> None:
    """lstrlib.c 5.4 match_class still has `case 'z' : res = (c == 0);` ("deprecated
    option"): string.find("a\0", "%z") is 2, "%Z" is every other byte, in sets and
    frontiers too."""
    assert sweep([b"%z", b"%Z", b"[%z]", b"[^%z]", b"[%Z]", b"%f[%z]", b"%f[%Z]", b"%z+"]) == []


# --- gsub --------------------------------------------------------------------------------

REPL_TOKENS = [b"%0", b"%1", b"%2", b"%3", b"%9", b"%%", b"%x", b"%", b"%\x00"] + [
    bytes([c]) for c in b"x-\x00<>"
]
repl_strings = st.lists(st.sampled_from(REPL_TOKENS), max_size=4).map(lambda xs: S(b"".join(xs)))
repl_numbers = st.one_of(
    st.integers(-3, 30).map(I), st.sampled_from([F(1.5), F(2.0), F(-0.0), F(1e100), F(float("inf"))])
)
repl_values = st.sampled_from(
    [S(b"X"), S(b"%1"), S(b""), I(7), F(2.5), F(3.0), FALSE, NIL, TRUE, (b"tbl",), (b"fn",), (b"named",)]
)
table_keys = st.one_of(
    st.sampled_from([b"a", b"b", b"ab", b"", b"1", b"(", b" ", b"aa", b"\x00"]).map(S),
    st.integers(1, 6).map(I),
)


@st.composite
def repl_tables(draw: st.DrawFn) -> tuple[Any, ...]:
    entries = draw(st.lists(st.tuples(table_keys, repl_values), max_size=4))
    fallback = draw(st.one_of(st.none(), repl_values))
    if fallback is None:
        return (b"rtable", [list(e) for e in entries])
    return (b"rtable", [list(e) for e in entries], fallback)


func_returns = st.one_of(
    repl_values,
    st.sampled_from([(b"none",), (b"raise", b"boom"), S(b"%0"), I(-1)]),
)
repl_funcs = st.lists(func_returns, min_size=1, max_size=3).map(lambda rs: (b"rfunc", rs))
repls = st.one_of(repl_strings, repl_strings, repl_numbers, repl_tables(), repl_funcs, repl_funcs)
max_ns = st.one_of(
    st.just(ABSENT),
    st.just(NIL),
    st.integers(-2, 4).map(I),
    st.sampled_from([F(1.0), F(1.5), S(b"2"), S(b"x"), I(INT64_MAX), I(INT64_MIN)]),
)


@PROPS
@given(s=subjects, p=any_pattern, repl=repls, max_n=max_ns)
@example(s=b"hello world", p=b"(o)", repl=S(b"[%1%0%%]"), max_n=ABSENT)
@example(s=b"abc", p=b"", repl=S(b"-"), max_n=ABSENT)
@example(s=b"abc", p=b"%w*", repl=S(b"-"), max_n=ABSENT)
@example(s=b"a", p=b"(a", repl=S(b"x"), max_n=ABSENT)
@example(s=b"a", p=b"(a", repl=S(b"%1"), max_n=ABSENT)
@example(s=b"a", p=b"a", repl=S(b"%2"), max_n=ABSENT)
@example(s=b"a", p=b"a", repl=S(b"x%"), max_n=ABSENT)
@example(s=b"abab", p=b"()b", repl=S(b"%1"), max_n=I(1))
@example(s=b"ab", p=b"a", repl=(b"rtable", [[S(b"a"), (b"tbl",)]]), max_n=ABSENT)
@example(s=b"ab", p=b"()a", repl=(b"rtable", [[I(1), S(b"P")]], S(b"Q")), max_n=ABSENT)
@example(s=b"ab", p=b"(a)(b)", repl=(b"rfunc", [TRUE]), max_n=ABSENT)
@example(s=b"aaa", p=b"^a", repl=(b"rfunc", [(b"none",)]), max_n=NIL)
def test_gsub_returns_and_calls_what_c_string_gsub_does(s: bytes, p: bytes, repl: Any, max_n: Any) -> None:
    """string.gsub(s, p, repl [, n]): the new string and the count; %0-%9 and %% in a
    replacement string (a position capture as its number); a table indexed (with its
    __index) by the first capture; a function called with every capture; nil/false keeping
    the match; numbers as strings; the max-n argument; '^' anchoring; and the errors."""
    check("gsub", arglist(S(s), S(p), repl, max_n))


# --- argument checking -------------------------------------------------------------------

ODD = [
    ABSENT, NIL, TRUE, FALSE, I(0), I(2), I(-1), I(INT64_MAX), F(2.0), F(1.5), F(-0.0), F(1e100), F(2.0**63),
    F(float("inf")), F(float("nan")), S(b"2"), S(b" 0x3 "), S(b"1e1"), S(b"1.5"), S(b"abc"), S(b""), S(b"a"),
    (b"tbl",), (b"named",), (b"fn",),
]  # fmt: skip
odd = st.sampled_from(ODD)


@PROPS
@given(
    kind=st.sampled_from(["find", "match", "gmatch", "gsub"]),
    a1=odd | subjects.map(S),
    a2=odd | any_pattern.map(S),
    a3=odd | repls,
    a4=odd,
)
@example(kind="find", a1=ABSENT, a2=ABSENT, a3=ABSENT, a4=ABSENT)
@example(kind="find", a1=S(b"a"), a2=ABSENT, a3=ABSENT, a4=ABSENT)
@example(kind="match", a1=(b"tbl",), a2=S(b"a"), a3=ABSENT, a4=ABSENT)
@example(kind="find", a1=S(b"a"), a2=S(b"a"), a3=F(1.5), a4=ABSENT)
@example(kind="find", a1=S(b"a"), a2=S(b"a"), a3=S(b"x"), a4=ABSENT)
@example(kind="find", a1=S(b"a"), a2=S(b"a"), a3=(b"named",), a4=ABSENT)
@example(kind="gsub", a1=S(b"a"), a2=S(b"a"), a3=ABSENT, a4=ABSENT)
@example(kind="gsub", a1=S(b"a"), a2=S(b"a"), a3=NIL, a4=ABSENT)
@example(kind="gsub", a1=S(b"a"), a2=S(b"a"), a3=TRUE, a4=F(1.5))
@example(kind="gsub", a1=I(123), a2=S(b"2"), a3=S(b"2"), a4=ABSENT)
@example(kind="gmatch", a1=S(b"a"), a2=ABSENT, a3=ABSENT, a4=ABSENT)
@example(kind="gmatch", a1=S(b"a"), a2=S(b"a"), a3=F(1.5), a4=ABSENT)
@example(kind="find", a1=F(1e100), a2=I(1), a3=S(b"2"), a4=ABSENT)
def test_arguments_are_checked_and_converted_like_c(kind: str, a1: Any, a2: Any, a3: Any, a4: Any) -> None:
    """lauxlib's checks, in C's order: strings (numbers converted, "string expected, got
    nil / no value / boolean / table / MyThing (__name)"), optional integers ("number has no
    integer representation", "number expected, got string", numeric strings accepted),
    gsub's "string/function/table expected" (checked after its 4th argument), and a number
    subject converted with tostring's format."""
    check(kind, arglist(a1, a2, a3, a4))


# --- recursion depth ("pattern too complex") ---------------------------------------------

# Items that can all match the empty string, so the first path the matcher tries succeeds
# at every start: the work stays linear while the recursion depth grows with the pattern.
# An item that does not match once is skipped without recursion; `x-` recurses whenever x
# matches the next byte (without consuming it), `x?` when it consumes one, `x*` once after
# consuming them all (so never in the middle here), a capture at its start and at its end.
# Mandatory items only come first (before any choice point), so failing there is cheap.
DEEP_ITEMS = [b"a-", b".-", b"%w-", b"[ab]-", b"a?", b"%a?", b".?", b"b?", b"()", b"(a?)", b"(a-)", b"b*"]
DEEP_PREFIX = [b"a", b"%a", b"[ab]", b".", b"%f[a]", b"%f[%w]"]


@st.composite
def deep_cases(draw: st.DrawFn) -> tuple[str, bytes, bytes]:
    prefix = draw(st.lists(st.sampled_from(DEEP_PREFIX), max_size=20))
    n_items = draw(st.integers(150, 250))
    chosen = draw(st.lists(st.sampled_from(DEEP_ITEMS), min_size=n_items, max_size=n_items))
    caps, body = 0, list(prefix)
    for it in chosen:
        if it.startswith(b"("):
            caps += 1
            if caps > 30:
                continue
        body.append(it)
    subject = b"a" * draw(st.integers(0, 260)) + draw(st.sampled_from([b"", b"b", b"ba"]))
    kind = draw(st.sampled_from(["find", "match", "gmatch", "gsub"]))
    return kind, subject, b"".join(body)


@settings(PROPS, max_examples=max(1, EXAMPLES // 3))
@given(case=deep_cases())
@example(case=("find", b"a" * 198, b"a?" * 198))
@example(case=("find", b"a" * 199, b"a?" * 199))
@example(case=("find", b"a" * 200, b"a?" * 200))
@example(case=("find", b"a" * 199, b"a*" * 199))
@example(case=("find", b"a" * 200, b"a*" * 200))
@example(case=("match", b"a" * 200, b"a-" * 199))
@example(case=("match", b"a" * 200, b"a-" * 200))
def test_recursion_limit_is_c_s_limit(case: tuple[str, bytes, bytes]) -> None:
    """C's matcher counts its recursion (MAXCCALLS 200) and raises "pattern too complex"
    past it; the port must count the same calls: a pattern one item shorter matches."""
    kind, s, p = case
    args = [S(s), S(p), S(b"x")] if kind == "gsub" else [S(s), S(p)]
    outcome = check(kind, args)
    event("too complex" if c_error(outcome) == b"pattern too complex" else "within limit")


# --- each error message, explicitly ------------------------------------------------------

ERRORS = [
    ("find", [S(b"a"), S(b"%")], b"malformed pattern (ends with '%')"),
    ("find", [S(b"a"), S(b"[a")], b"malformed pattern (missing ']')"),
    ("find", [S(b"a"), S(b"[]")], b"malformed pattern (missing ']')"),
    ("find", [S(b"a"), S(b"[%")], b"malformed pattern (missing ']')"),
    ("find", [S(b"a"), S(b"%f")], b"missing '[' after '%f' in pattern"),
    ("find", [S(b"a"), S(b"%fa")], b"missing '[' after '%f' in pattern"),
    ("find", [S(b"a"), S(b"%b")], b"malformed pattern (missing arguments to '%b')"),
    ("find", [S(b"a"), S(b"%ba")], b"malformed pattern (missing arguments to '%b')"),
    ("find", [S(b"a"), S(b"(a)%2")], b"invalid capture index %2"),
    ("find", [S(b"a"), S(b"%0")], b"invalid capture index %0"),
    ("find", [S(b"aa"), S(b"(a%1)")], b"invalid capture index %1"),
    ("match", [S(b"a"), S(b"a)")], b"invalid pattern capture"),
    ("match", [S(b"a"), S(b"(a")], b"unfinished capture"),
    ("find", [S(b"a"), S(b"(" * 33)], b"too many captures"),
    ("find", [S(b"a" * 300), S(b"a?" * 300)], b"pattern too complex"),
    ("find", [S(b"a" * 250), S(b"(" * 30 + b"a?" * 180 + b")" * 30)], b"pattern too complex"),
    ("gmatch", [S(b"a"), S(b"%")], b"malformed pattern (ends with '%')"),
    ("gsub", [S(b"a"), S(b"a"), S(b"%x")], b"invalid use of '%' in replacement string"),
    ("gsub", [S(b"a"), S(b"a"), S(b"x%")], b"invalid use of '%' in replacement string"),
    ("gsub", [S(b"a"), S(b"a"), S(b"%2")], b"invalid capture index %2"),
    ("gsub", [S(b"a"), S(b"(a"), S(b"%1")], b"unfinished capture"),
    ("gsub", [S(b"a"), S(b"a"), (b"rtable", [[S(b"a"), (b"tbl",)]])], b"invalid replacement value (a table)"),
    ("gsub", [S(b"a"), S(b"a"), (b"rfunc", [TRUE])], b"invalid replacement value (a boolean)"),
    ("gsub", [S(b"a"), S(b"a"), (b"rfunc", [(b"fn",)])], b"invalid replacement value (a function)"),
    ("find", [], b"bad argument #1 to '?' (string expected, got no value)"),
    ("find", [NIL, S(b"a")], b"bad argument #1 to '?' (string expected, got nil)"),
    ("match", [S(b"a")], b"bad argument #2 to '?' (string expected, got no value)"),
    ("gmatch", [S(b"a"), TRUE], b"bad argument #2 to '?' (string expected, got boolean)"),
    ("find", [S(b"a"), S(b"a"), F(1.5)], b"bad argument #3 to '?' (number has no integer representation)"),
    ("find", [S(b"a"), S(b"a"), S(b"1.5")], b"bad argument #3 to '?' (number has no integer representation)"),
    ("find", [S(b"a"), S(b"a"), S(b"x")], b"bad argument #3 to '?' (number expected, got string)"),
    ("match", [S(b"a"), S(b"a"), (b"named",)], b"bad argument #3 to '?' (number expected, got MyThing)"),
    ("gsub", [S(b"a"), S(b"a")], b"bad argument #3 to '?' (string/function/table expected, got no value)"),
    ("gsub", [S(b"a"), S(b"a"), NIL], b"bad argument #3 to '?' (string/function/table expected, got nil)"),
    (
        "gsub",
        [S(b"a"), S(b"a"), NIL, F(1.5)],
        b"bad argument #4 to '?' (number has no integer representation)",
    ),
]


@pytest.mark.parametrize(("kind", "args", "message"), ERRORS, ids=[m.decode() for _, _, m in ERRORS])
def test_each_error_message_is_c_s_message(kind: str, args: list[Any], message: bytes) -> None:
    """Every error C's matcher raises, raised by the port with the same text."""
    c, p = oracle().outcomes(kind, args)
    assert c_error(c) == message, c  # the case really provokes that error in C
    assert p == c


def test_lazy_errors_and_odd_results_match_c() -> None:
    """Corner cases where C's behaviour is surprising, each checked against C."""
    cases: list[tuple[str, list[Any]]] = [
        ("find", [S(b"x"), S(b"a[")]),  # the bad set is never reached: no error
        ("gsub", [S(b"a"), S(b"(a"), S(b"x")]),  # unfinished capture not read: "x", 1
        ("find", [S(b"a"), S(b"(a)%2")]),
        ("find", [S(b"aa"), S(b"()a%1")]),  # a back-reference to a position capture never matches
        ("gsub", [I(123), S(b"2"), S(b"2")]),  # changed (to the same text): a string
        ("find", [S(b"abc"), S(b"")]),
        ("find", [S(b"abc"), S(b"b"), I(INT64_MIN)]),
        ("find", [S(b"abc"), S(b"b"), I(INT64_MAX)]),
        ("gmatch", [S(b"abc"), S(b"."), I(INT64_MAX)]),
        ("gsub", [S(b"abc"), S(b"%w"), S(b"%0%0"), I(INT64_MIN)]),
        ("find", [S(b"a\x00b"), S(b"\x00")]),
        ("find", [S(b"a\x00b"), S(b"%z")]),
        ("match", [S(b"a\x00b\x00"), S(b"(\x00.)%1?")]),
        ("match", [S(b"f(a(b)c)d"), S(b"%b()")]),
        ("match", [S(b"THE (quick) fox"), S(b"%f[%a]%a+")]),
        ("match", [S(b"x"), S(b"%f[%z]")]),
        ("gsub", [S(b"hello world"), S(b"%f[%w]%w+"), (b"rfunc", [S(b"<%0>"), (b"none",)])]),
    ]
    for kind, args in cases:
        check(kind, args)


@pytest.mark.parametrize(
    "args",
    [
        [I(123), S(b"x"), S(b"y")],
        [I(123), S(b"2"), (b"rtable", [])],
        [I(123), S(b"2"), (b"rfunc", [FALSE])],
        [F(1.5), S(b"%."), S(b"!"), I(0)],
        [I(7), S(b"x"), S(b"y"), I(1)],
    ],
)
def test_gsub_gives_back_an_unchanged_number_subject_as_a_string(args: list[Any]) -> None:
    """C's str_gsub reads its subject with luaL_checklstring, which converts a number
    argument to a string in place; "no changes" then returns that slot
    (lua_pushvalue(L, 1)): string.gsub(123, "x", "y") is "123", 0 -- a string."""
    c = check("gsub", args)
    assert c[1].startswith(b'"'), c  # C's first result is a string


@pytest.mark.parametrize(
    ("s", "p", "calls"),
    [
        (b"a", b"a-" * 200, 2),  # C: "pattern too complex", then "" (no limit left at all)
        (b"a", b"a-" * 50 + b"%", 5),  # C: malformed x3, then "pattern too complex", then malformed
    ],
    ids=["too-complex-then-unlimited", "malformed-lowers-the-limit"],
)
def test_gmatch_iterator_keeps_c_s_spent_recursion_budget_after_an_error(
    s: bytes, p: bytes, calls: int
) -> None:
    """lstrlib.c 5.4's reprepstate only asserts matchdepth == MAXCCALLS; an error unwinds
    match() without giving back the depth it spent, and a gmatch iterator keeps its
    MatchState across calls. So each failed call lowers the limit for the next one, and
    after "pattern too complex" (matchdepth -1) the iterator has no limit at all. (In C
    that unbounded recursion can overflow the C stack: string.gmatch("aaaa",
    ("a-"):rep(1000000)) called twice under pcall kills the process with SIGSEGV.)"""
    o = oracle()
    run = o.lua.eval(
        b"function(gm, s, p, calls) local it = gm(s, p); local out = {} "
        b"for i = 1, calls do local ok, v = pcall(it); out[i] = tostring(ok) .. ' ' .. tostring(v) end "
        b"return out end"
    )
    c = lua_list(run(o.lua.eval(b"string.gmatch"), s, p, calls))
    port = lua_list(run(o.port.gmatch, s, p, calls))
    assert c[-1].startswith(b"true") or c[-2] == b"false pattern too complex", c  # C's quirk is real
    assert port == c


# --- the point of the port: the count hook reaches it ------------------------------------

HOOK_PROBE = r"""
import json, sys
from importlib.resources import files
import lupa.lua54 as lupa

lua = lupa.LuaRuntime(encoding=None)
port = lua.execute(files("runtime.engine").joinpath("lua/patterns.lua").read_text().encode())
probe = lua.execute(b'''
local port, kind = ...
local s, p = string.rep("a", 40), string.rep("a*", 20) .. "b"
local f
if kind == "find" then f = function() return port.find(s, p) end
elseif kind == "match" then f = function() return port.match(s, p) end
elseif kind == "gmatch" then f = function() for _ in port.gmatch(s, p) do end end
else f = function() return port.gsub(s, p, "x") end end
local t0 = os.clock()
debug.sethook(function() error("stopped", 0) end, "", 10000)
local ok, err = pcall(f)
debug.sethook()
return ok, err, os.clock() - t0
''', port, sys.argv[1].encode())
ok, err, elapsed = probe
print(json.dumps({"ok": bool(ok), "err": err.decode("latin-1") if isinstance(err, bytes) else repr(err),
                  "elapsed": elapsed}))
"""


@pytest.mark.parametrize("kind", ["find", "match", "gmatch", "gsub"])
def test_catastrophic_pattern_in_the_port_stops_at_the_count_hook(kind: str) -> None:
    """string.rep("a", 40) against string.rep("a*", 20) .. "b" would run for ages in C
    (which the hook never reaches). Through the port, a count hook raising "stopped" must
    end the call promptly with exactly that error (not swallowed, not the C matcher). Run
    in a subprocess so that a port secretly calling C fails the test instead of hanging it."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", HOOK_PROBE, kind],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"port.{kind} ran for 30 s under a count hook: the hook never reached it")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["ok"] is False and result["err"] == "stopped", result
    assert result["elapsed"] < 2.0, result


# --- the router: what the sandbox installs as string.find/match/gmatch/gsub ---------------

_ROUTER_ORACLE: Oracle | None = None


def router_oracle() -> Oracle:
    """The same comparison with the router in the port's place: each call goes to C or to
    the port by its estimated cost, and a gsub replacement function or table sent to C is
    wrapped to check its values."""
    global _ROUTER_ORACLE
    if _ROUTER_ORACLE is None:
        o = Oracle()
        o.port = o.lua.eval("function(M) return M.router({}) end")(o.port)
        o.compare = o.lua.execute(HELPER.encode(), o.port, GMATCH_LIMIT, PORT_BUDGET)
        _ROUTER_ORACLE = o
    return _ROUTER_ORACLE


# Subjects long enough that patterns with a few quantifiers go to the port.
long_subjects = st.lists(st.sampled_from(SUBJECT_BYTES), min_size=0, max_size=48).map(b"".join)


def check_router(kind: str, args: Sequence[Any]) -> None:
    c, r = router_oracle().outcomes(kind, args)
    if b"budget" in r:
        event("router over budget (discarded)")
        assume(False)
    assert r == c, f"router string.{kind}{tuple(args)!r}: C={c!r} router={r!r}"


@PROPS
@given(kind=st.sampled_from(["find", "match", "gmatch"]), s=long_subjects, p=any_pattern, init=inits)
def test_the_router_answers_as_c_does(kind: str, s: bytes, p: bytes, init: Any) -> None:
    """Whichever way the router sends a call, the caller sees C's answer."""
    check_router(kind, arglist(S(s), S(p), init))


@PROPS
@given(s=long_subjects, p=any_pattern, repl=repls, max_n=max_ns)
@example(s=b"ab", p=b"a", repl=(b"rtable", [[S(b"a"), (b"tbl",)]]), max_n=ABSENT)
@example(s=b"ab", p=b"(a)(b)", repl=(b"rfunc", [TRUE]), max_n=ABSENT)
@example(s=b"abab", p=b"a", repl=(b"rfunc", [I(7), F(2.5), FALSE]), max_n=ABSENT)
@example(s=b"abab", p=b"(a)", repl=(b"rtable", [[S(b"a"), I(3)]]), max_n=ABSENT)
@example(s=b"abab", p=b"()b", repl=(b"rtable", [[I(2), F(0.5)]], S(b"Q")), max_n=ABSENT)
@example(s=b"ab" * 24, p=b"a*b*a*b", repl=(b"rfunc", [I(7), (b"none",), S(b"x")]), max_n=ABSENT)
@example(s=b"ab" * 24, p=b"(a*)b*a*b", repl=(b"rtable", [[S(b"a"), I(1)]], NIL), max_n=I(3))
def test_the_router_gsub_answers_as_c_does(s: bytes, p: bytes, repl: Any, max_n: Any) -> None:
    """gsub through the router, including replacement functions and tables it wraps to
    check their values when it keeps the call in C."""
    check_router("gsub", arglist(S(s), S(p), repl, max_n))

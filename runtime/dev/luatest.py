"""``lunaflow test PROJECT``: the project's own Lua tests (``tests/*_test.lua``) against an
in-process platform on a fake clock; then the project's golden journals (``tests/golden/``,
runtime/dev/golden.py) are replayed on its code.

A test file declares tests; each runs against a fresh ``LocalPlatform`` of the project::

    test("a paid sale settles", function(p)
        p:fetch("POST", "/api/sale", { body = json.encode({ id = "lot-1", winner = "ada", price = 5 }) })
        p:signal("sale-lot-1", "paid", { by = "ada" })
        assert_eq(p:get("sale-lot-1").result.outcome, "settled")
    end)

``p`` has start, signal, fetch, advance, settle, get, journal, runs, cancel, resume, retry,
stub_object(class, method, fn(key, ...)) and stub_http(fn(request)). Assertions:
``assert_eq(actual, expected, message)``, ``assert_true(value, message)``; any error fails
the test, reported with its file and line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from runtime.dev.golden import replay_goldens
from runtime.dev.harness import LocalPlatform
from runtime.dev.standins import NotStubbed
from runtime.engine.project import ProjectSource
from runtime.engine.sandbox import Sandbox
from runtime.errors import LunaflowError
from runtime.store.base import RunRecord

RUNNER = """
local encode = ...
local tests = {}
local function show(v)
  local s = encode(v)
  return s or tostring(v)
end
local function same(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  return show(a) == show(b)
end
return {
  tests = tests,
  test = function(name, fn)
    if type(name) ~= "string" or type(fn) ~= "function" then
      error('test needs a name and a function: test("it works", function(p) ... end)', 2)
    end
    tests[#tests + 1] = { name = name, fn = fn }
  end,
  assert_eq = function(actual, expected, message)
    if not same(actual, expected) then
      error((message and (message .. ": ") or "") .. "expected " .. show(expected) .. ", got " .. show(actual), 2)
    end
    return actual
  end,
  assert_true = function(value, message)
    if not value then error(message or ("expected a true value, got " .. show(value)), 2) end
    return value
  end,
}
"""

PLATFORM = """
local call = ...
local P = {}
P.__index = P
local names = { "start", "signal", "fetch", "advance", "settle", "get", "journal", "runs", "cancel",
  "resume", "retry", "stub_object", "stub_http" }
for _, name in ipairs(names) do
  -- Parenthesised, not a tail call: a refusal must point at the test's own line.
  P[name] = function(self, ...) return (call(name, ...)) end
end
return setmetatable({}, P)
"""


@dataclass
class Outcome:
    file: str
    name: str
    error: str | None = None
    traceback: str | None = None


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.error is not None]

    @property
    def passed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.error is None]


class _Session:
    """One test's platform, and the host calls its Lua ``p`` object makes."""

    def __init__(self, project: Path, sandbox: Sandbox, call_function: Any) -> None:
        self.sandbox = sandbox
        # Bound before any test runs: stubs are called back from inside Lua coroutines,
        # where lupa misreads table fields (see docs/architecture.md).
        self.call_function = call_function
        self.stubs: dict[tuple[str, str], Any] = {}
        self.http: Any = None
        # A folder of the platform's own (deleted when it closes): its databases go on the
        # process's scratch server, each test's apart, where a folder given to it would copy
        # and start a PostgreSQL cluster for every test.
        self.p = LocalPlatform(project, objects=self._object, http=self._http)

    def close(self) -> None:
        self.p.close()

    def _call_lua(self, fn: Any, *args: Any) -> list[Any]:
        ok, out, _tb = self.call_function(fn, self.sandbox.pack(args), self.sandbox.instructions)
        if not ok:
            raise LunaflowError(str(out))
        result: list[Any] = json.loads(out)
        return result

    def _object(self, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        stub = self.stubs.get((cls, method))
        if stub is None:
            raise NotStubbed
        return self._call_lua(stub, key, *args)

    def _http(self, spec: dict[str, Any], body: bytes | None) -> dict[str, Any]:
        if self.http is None:
            raise LunaflowError(
                "http is stubbed in lunaflow test: call p:stub_http(function(request) ... end)"
            )
        request = {**spec, "body": None if body is None else body.decode("utf-8", "replace")}
        out = self._call_lua(self.http, request)
        answer = out[0] if out else None
        if not isinstance(answer, dict):
            raise LunaflowError('the http stub must return a table like { status = 200, body = "" }')
        return {
            "status": int(answer.get("status", 200)),
            "headers": answer.get("headers") or {},
            "body": str(answer.get("body") or ""),
        }

    def call(self, name: str, *args: Any) -> Any:
        p = self.p
        lua = self.sandbox.to_lua

        def plain(value: Any) -> Any:
            return _from_lua(value)

        if name == "start":
            opts = plain(args[2]) if len(args) > 2 and args[2] is not None else {}
            run = p.start(
                str(args[0]),
                plain(args[1]) if len(args) > 1 else None,
                id=opts.get("id"),
                timeout=opts.get("timeout"),
                signal=opts.get("signal"),
                payload=opts.get("payload"),
            )
            return lua(_run(run))
        if name == "signal":
            return p.signal(str(args[0]), str(args[1]), plain(args[2]) if len(args) > 2 else None)
        if name == "fetch":
            opts = plain(args[2]) if len(args) > 2 and args[2] is not None else {}
            r = p.fetch(str(args[0]), str(args[1]), opts.get("body"), opts.get("headers"), opts.get("query"))
            return lua({"status_code": r.status_code, "headers": r.headers, "body": r.body})
        if name == "advance":
            p.advance(plain(args[0]))
            return None
        if name == "settle":
            p.settle()
            return None
        if name == "get":
            return lua(_run(p.get(str(args[0]))))
        if name == "journal":
            return lua(
                [
                    {"seq": e.seq, "kind": e.kind, "name": e.name, "data": e.data}
                    for e in p.journal(str(args[0]))
                ]
            )
        if name == "runs":
            opts = plain(args[0]) if args and args[0] is not None else {}
            return lua([_run(r) for r in p.runs(status=opts.get("status"), workflow=opts.get("workflow"))])
        if name == "cancel":
            p.cancel(str(args[0]))
            return None
        if name == "resume":
            p.resume(str(args[0]))
            return None
        if name == "retry":
            p.retry(str(args[0]))
            return None
        if name == "stub_object":
            self.stubs[(str(args[0]), str(args[1]))] = args[2]
            return None
        if name == "stub_http":
            self.http = args[0]
            return None
        raise LunaflowError(f"p:{name} is not part of the test platform")


def _run(run: RunRecord) -> dict[str, Any]:
    return run.summary()


def _from_lua(value: Any) -> Any:
    """A Lua value from the test file as plain Python (tables with 1..n keys become lists)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    try:
        items = list(value.items())
    except AttributeError:
        return str(value)
    keys = [k for k, _ in items]
    if keys and all(isinstance(k, int) for k in keys) and sorted(keys) == list(range(1, len(keys) + 1)):
        return [_from_lua(v) for _, v in sorted(items)]
    return {str(k): _from_lua(v) for k, v in items}


def run_tests(project: str | Path, *, pattern: str | None = None, out: TextIO | None = None) -> Report:
    project = Path(project)
    report = Report()

    def write(line: str) -> None:
        if out is not None:
            out.write(line + "\n")

    for path in sorted((project / "tests").glob("*_test.lua")):
        _run_file(project, path, pattern, report, write)
    for v in replay_goldens(project, pattern):
        what = f"golden run {v.run_id} ({v.workflow}, {v.status})"
        report.outcomes.append(Outcome(v.file, what, None if v.passed else v.message))
        write(f"PASS {v.file}: {what}: {v.message}" if v.passed else f"FAIL {v.message} ({v.file}: {what})")
    write(f"{len(report.passed)} passed, {len(report.failed)} failed")
    return report


def _run_file(
    project: Path, path: Path, pattern: str | None, report: Report, write: Callable[[str], None]
) -> None:
    limits = ProjectSource.read(project).limits
    sandbox = Sandbox(
        max_memory=limits.memory_bytes, instructions=limits.instructions, cpu_seconds=limits.cpu_seconds
    )
    current: dict[str, _Session] = {}

    def host_call(name: str, *args: Any) -> Any:
        return current["session"].call(name, *args)

    sandbox.register("t_call", host_call)
    sandbox.register("log", lambda *a: None)
    sandbox.register("now", lambda: 0)
    sandbox.register("json_parse", lambda text: sandbox.to_lua(json.loads(text)))
    runner = sandbox.lua.execute(RUNNER, sandbox.engine.encode)
    for name in ("test", "assert_eq", "assert_true"):
        sandbox.engine.set_extras(name, runner[name])
    # As the prelude's call_host does for every host call: the memory limit is lifted while
    # Python runs (it builds the answer's tables in the state) and armed again before Lua
    # goes on. An allocation failing while Python holds the state would freeze or abort the
    # process; armed again, an answer that left the state over its limit fails in Lua.
    call = sandbox.lua.eval(
        "function(host) local call, arm, lift = host.call, host.arm, host.lift "
        "return function(name, ...) lift() local r = table.pack(call('t_call', name, ...)) arm() "
        "if not r[1] then error(r[2], 3) end return table.unpack(r, 2, r.n) end end"
    )(sandbox.lua.table_from({"call": sandbox._dispatch, "arm": sandbox._arm, "lift": sandbox._lift}))
    platform_obj = sandbox.lua.execute(PLATFORM, call)
    call_function = sandbox.engine.call_function
    ok, err = sandbox.engine.load_script(path.name, path.read_text(encoding="utf-8"), sandbox.instructions)
    if not ok:
        report.outcomes.append(Outcome(path.name, "(loading the file)", str(err)))
        write(f"FAIL {path.name}: {err}")
        return
    for t in runner.tests.values():
        name = str(t.name)
        if pattern and pattern not in name:
            continue
        session = current["session"] = _Session(project, sandbox, call_function)
        try:
            args = sandbox.lua.table_from({1: platform_obj, "n": 1})
            passed, message, tb = call_function(t.fn, args, sandbox.instructions)
        finally:
            session.close()
        if not passed:
            message = sandbox.explain(str(message))  # a bare "not enough memory" names the limit
        report.outcomes.append(Outcome(path.name, name, None if passed else str(message), tb))
        write(f"PASS {path.name}: {name}" if passed else f"FAIL {message} ({path.name}: {name})")

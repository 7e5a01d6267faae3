"""The editor annotations (runtime/engine/lua/types/lunaflow.lua) describe every global of the SPEC.

Issue: "The annotations load in lua-language-server ... or checked by a test that parses
them, and describe every global of the SPEC." lua-language-server is not available here, so
these tests parse the file's LuaCATS annotations (---@class, ---@field, ---@alias, ---@param,
---@return and the function declarations they annotate), compile and run it in a plain Lua
5.4 state, and check that a real script sees each annotated global.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import lupa.lua54 as lupa
import pytest

from runtime.dev import luatest
from runtime.dev.scaffold import scaffold
from runtime.testing import LocalPlatform

ROOT = Path(__file__).resolve().parents[2]
TYPES = ROOT / "runtime" / "engine" / "lua" / "types" / "lunaflow.lua"

# SPEC 2, "Globals of a script": the globals that are functions, and the tables of functions.
SPEC_FUNCTIONS = {  # name -> its one parameter
    "workflow": "name",
    "workflows": "name",
    "database": "name",
    "object": "name",
    "objects": "name",
    "kv": "namespace",
    "secret": "name",
    "queue": "name",
    "on": "event",
}
SPEC_TABLES = {
    "json": ["parse", "encode"],
    "uuid": ["v4"],
    "http": ["request", "get", "post"],
    "crypto": ["sha256", "hmac_sha256", "random_bytes", "hex", "base64_encode", "base64_decode"],
    "Jwt": ["sign", "verify"],
    "log": ["info", "warn", "error"],
}
STATUSES = ["running", "sleeping", "awaiting", "failed", "completed", "cancelled"]


@dataclass
class Function:
    params: list[str]
    annotated: dict[str, str] = field(default_factory=dict)  # @param name -> type
    returns: list[str] = field(default_factory=list)  # @return types


@dataclass
class Types:
    classes: dict[str, dict[str, str]] = field(default_factory=dict)  # class -> @field name -> type
    methods: dict[str, dict[str, Function]] = field(default_factory=dict)  # class -> name -> fn
    aliases: dict[str, str] = field(default_factory=dict)
    functions: dict[str, Function] = field(default_factory=dict)  # global functions
    tables: dict[str, str] = field(default_factory=dict)  # global table -> its class


def parse(text: str) -> Types:
    """A small reader of the LuaCATS subset the file uses."""
    types = Types()
    current: str | None = None  # the class the latest ---@class named
    bound: dict[str, str] = {}  # a Lua variable or global table -> its class
    params: dict[str, str] = {}
    returns: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if m := re.match(r"---@class\s+([\w.]+)", line):
            current = m.group(1)
            types.classes.setdefault(current, {})
            types.methods.setdefault(current, {})
        elif m := re.match(r"---@field\s+(\w+)\??\s+(.+)", line):
            assert current is not None, f"a field outside a class: {line}"
            types.classes[current][m.group(1)] = m.group(2)
        elif m := re.match(r"---@alias\s+([\w.]+)\s+(.+)", line):
            types.aliases[m.group(1)] = m.group(2)
        elif m := re.match(r"---@param\s+(\w+)\??\s+(.+)", line):
            params[m.group(1)] = m.group(2)
        elif m := re.match(r"---@return\s+(.+)", line):
            returns.append(m.group(1))
        elif m := re.match(r"(?:local\s+)?(\w+)\s*=\s*\{\}$", line):
            assert current is not None, f"a table without a class: {line}"
            bound[m.group(1)] = current
            if not line.startswith("local"):
                types.tables[m.group(1)] = current
        elif m := re.match(r"function\s+(\w+)(?:([.:])(\w+))?\(([^)]*)\)\s*end$", line):
            owner, _, name, args = m.groups()
            fn = Function([a.strip() for a in args.split(",") if a.strip()], params, returns)
            if name is None:
                types.functions[owner] = fn
            else:
                assert owner in bound, f"{owner} is not a declared table: {line}"
                types.methods[bound[owner]][name] = fn
            params, returns = {}, []
        elif line.startswith("function"):
            raise AssertionError(f"a function declaration the reader does not know: {line}")
    return types


@pytest.fixture(scope="module")
def types() -> Types:
    return parse(TYPES.read_text(encoding="utf-8"))


def lua_list(names: list[str]) -> str:
    return "{ " + ", ".join(json.dumps(n) for n in names) + " }"


def returned(fn: Function) -> str:
    return " ".join(fn.returns)


# --- every global of SPEC 2 ----------------------------------------------------------------------


@pytest.mark.parametrize("name", SPEC_FUNCTIONS)
def test_each_global_function_of_the_spec_is_declared(types: Types, name: str) -> None:
    """SPEC 2: `workflow`, `workflows`, `database`, `object`, `objects`, `kv`, `secret`,
    `queue`, `on` are globals of a script."""
    assert name in types.functions
    assert types.functions[name].params == [SPEC_FUNCTIONS[name]]
    assert types.functions[name].returns, f"{name} has no ---@return"


@pytest.mark.parametrize("table", list(SPEC_TABLES))
def test_each_global_table_of_the_spec_is_declared_with_all_its_functions(types: Types, table: str) -> None:
    """SPEC 2: `json.parse/encode`, `uuid.v4`, `http.request/get/post`, crypto's six
    functions, `Jwt.sign/verify`, `log.info/warn/error`."""
    assert table in types.tables
    assert set(SPEC_TABLES[table]) <= set(types.methods[types.tables[table]])


def test_workflow_declares_a_function_of_wf_and_input_and_returns_a_workflow_handle(types: Types) -> None:
    """SPEC 2: "`workflow "name" (function(wf, input) ... end)` declares a workflow; returns
    its handle"."""
    ret = returned(types.functions["workflow"])
    assert re.search(r"fun\(fn: fun\(wf: lunaflow\.Wf, input: \w+\)", ret), ret
    assert ret.endswith("lunaflow.Workflow"), ret
    assert returned(types.functions["workflows"]) == "lunaflow.Workflow"


def test_a_workflow_handle_has_start_and_get_returning_runs(types: Types) -> None:
    """SPEC 3: `settle:start(input, { id = ... })`, `settle:get(id)`."""
    methods = types.methods["lunaflow.Workflow"]
    assert methods["start"].params == ["input", "opts"]
    assert methods["get"].params == ["id"]
    assert returned(methods["start"]) == returned(methods["get"]) == "lunaflow.Run"
    assert "id" in types.classes["lunaflow.StartOptions"]


def test_a_run_has_id_status_result_signal_cancel_and_resume(types: Types) -> None:
    """SPEC 3: `run.id`, `run:status()`, `run:result()`, `run:signal(name, payload)`,
    `run:cancel()`, `run:resume()`."""
    assert "id" in types.classes["lunaflow.Run"]
    methods = types.methods["lunaflow.Run"]
    assert {"status", "result", "signal", "cancel", "resume"} <= set(methods)
    assert methods["signal"].params == ["name", "payload"]
    assert returned(methods["signal"]) == "boolean"
    assert returned(methods["status"]) == "lunaflow.Status"


def test_the_status_type_names_the_six_states(types: Types) -> None:
    """SPEC 3: `"running" | "sleeping" | "awaiting" | "failed" | "completed" | "cancelled"`."""
    assert sorted(re.findall(r'"(\w+)"', types.aliases["lunaflow.Status"])) == sorted(STATUSES)


def test_wf_has_id_workflow_step_id_and_the_six_methods(types: Types) -> None:
    """SPEC 3: `wf.id, wf.workflow`, `wf.step_id`, `wf:step`, `wf:sleep`, `wf:await`,
    `wf:race`, `wf:all`, and `wf:version`."""
    assert {"id", "workflow", "step_id"} <= set(types.classes["lunaflow.Wf"])
    methods = types.methods["lunaflow.Wf"]
    assert {"step", "sleep", "await", "race", "all", "version", "on_cancel"} <= set(methods)
    assert methods["step"].params == ["name", "opts_or_fn", "fn"]
    assert methods["race"].params == ["names", "opts"]
    assert len(methods["race"].returns) == 2, "race returns the payload and the name"


def test_step_and_wait_options_have_the_specs_fields(types: Types) -> None:
    """SPEC 3: `{ retries = 3, backoff = "5s", timeout = "30s" }`, and issue 26's `catch`,
    `max_backoff`, `jitter`; waits take `{ timeout }` (and wf:all `within`); wf:on_cancel
    `{ timeout }`."""
    assert set(types.classes["lunaflow.StepOptions"]) == {
        "retries",
        "backoff",
        "timeout",
        "catch",
        "max_backoff",
        "jitter",
    }
    assert set(types.classes["lunaflow.WaitOptions"]) == {"timeout", "within"}
    assert set(types.classes["lunaflow.CancelOptions"]) == {"timeout"}


def test_database_kv_and_queue_handles_have_their_methods(types: Types) -> None:
    """SPEC 2: database `:exec`, `:query`, `:first`; kv `:get`, `:put`, `:delete`, `:list`;
    queue `:send(body, { delay })`."""
    assert "lunaflow.Database" in returned(types.functions["database"])
    assert {"exec", "query", "first"} <= set(types.methods["lunaflow.Database"])
    assert set(types.classes["lunaflow.ExecResult"]) == {"changes"}  # issue 25: no last_insert_id
    assert "migrations" in types.classes["lunaflow.DatabaseOptions"]
    assert returned(types.functions["kv"]) == "lunaflow.Kv"
    assert {"get", "put", "delete", "list"} <= set(types.methods["lunaflow.Kv"])
    assert "ttl" in types.classes["lunaflow.KvPutOptions"]
    assert {"prefix", "limit"} <= set(types.classes["lunaflow.KvListOptions"])
    assert returned(types.functions["queue"]) == "lunaflow.Queue"
    assert "send" in types.methods["lunaflow.Queue"]
    assert "delay" in types.classes["lunaflow.SendOptions"]
    assert returned(types.functions["secret"]) == "string"


def test_fetch_requests_responses_and_http_have_the_specs_fields(types: Types) -> None:
    """SPEC 2: "A fetch request is `{ method, path, query, headers, body }`; the handler
    returns `{ status_code, headers, body }`"; `http.request{ method, url, headers, body,
    timeout }` returns `{ status, headers, body }`."""
    on = returned(types.functions["on"])
    assert "lunaflow.Request" in on and "lunaflow.Response" in on
    assert set(types.classes["lunaflow.Request"]) == {"method", "path", "query", "headers", "body"}
    assert set(types.classes["lunaflow.Response"]) == {"status_code", "headers", "body"}
    assert set(types.classes["lunaflow.HttpRequest"]) == {"method", "url", "headers", "body", "timeout"}
    assert set(types.classes["lunaflow.HttpResponse"]) == {"status", "headers", "body"}


# --- the file is consistent with itself and with lunaflow test ----------------------------------


def test_every_lunaflow_type_the_file_names_is_declared(types: Types) -> None:
    """An undeclared type would show as unknown in the editor."""
    annotations = "\n".join(line for line in TYPES.read_text().splitlines() if line.startswith("---"))
    named = set(re.findall(r"lunaflow\.\w+", annotations))
    assert named - set(types.classes) - set(types.aliases) == set()


def test_every_param_annotation_names_a_parameter_of_its_function(types: Types) -> None:
    """A ---@param for a parameter the function does not have is a typo the editor flags."""
    fns = list(types.functions.items()) + [
        (f"{cls}.{name}", fn) for cls, methods in types.methods.items() for name, fn in methods.items()
    ]
    wrong = {
        name: sorted(set(fn.annotated) - set(fn.params))
        for name, fn in fns
        if set(fn.annotated) - set(fn.params)
    }
    assert wrong == {}


def test_the_test_platform_declares_every_call_lunaflow_test_gives_p(types: Types) -> None:
    """luatest.py: "p has start, signal, fetch, advance, settle, get, journal, runs, cancel,
    resume, stub_object(class, method, fn(key, ...)) and stub_http(fn(request))"."""
    block = re.search(r"local names = \{(.*?)\}", luatest.PLATFORM, re.S)
    assert block is not None
    offered = set(re.findall(r'"(\w+)"', block.group(1)))
    assert set(types.methods["lunaflow.TestPlatform"]) == offered
    assert {"test", "assert_eq", "assert_true"} <= set(types.functions)
    assert "lunaflow.TestPlatform" in types.functions["test"].annotated["fn"]


# --- it is Lua, and the runtime has what it describes --------------------------------------------


def test_the_annotations_compile_and_run_in_a_plain_lua_54_state() -> None:
    """The file must be valid Lua 5.4; run, it defines each global it describes."""
    lua = lupa.LuaRuntime()
    compile = lua.eval(
        "function(source) local fn, err = load(source, '@lunaflow.lua', 't') return fn, err end"
    )
    fn, err = compile(TYPES.read_text(encoding="utf-8"))
    assert fn is not None, err
    fn()
    g = lua.globals()
    for name in SPEC_FUNCTIONS:
        assert lupa.lua_type(g[name]) == "function", name
    for table, names in SPEC_TABLES.items():
        for name in names:
            assert lupa.lua_type(g[table][name]) == "function", f"{table}.{name}"


def test_a_real_script_has_every_global_and_handle_member_the_annotations_describe(
    types: Types, tmp_path: Path
) -> None:
    """The annotations describe the runtime, not a wish: each annotated global function,
    table function, handle method and handle field exists in a script (the tables in
    handler code, where http, crypto and Jwt are present; wf.step_id in a step body)."""
    paths = [f"{t}.{n}" for t, cls in types.tables.items() for n in types.methods[cls]]

    def probe(label: str, var: str, cls: str) -> str:
        methods, fields = lua_list(sorted(types.methods[cls])), lua_list(sorted(types.classes[cls]))
        return (
            f"    for _, m in ipairs({methods}) do out['{label}:' .. m] = type({var}[m]) end\n"
            f"    for _, f in ipairs({fields}) do out['{label}.' .. f] = type({var}[f]) end"
        )

    project = tmp_path / "probe"
    (project / "migrations" / "probe").mkdir(parents=True)
    (project / "migrations" / "probe" / "001_t.sql").write_text(
        "CREATE TABLE t (x TEXT);\n", encoding="utf-8"
    )
    wf_fields = sorted(set(types.classes["lunaflow.Wf"]) - {"step_id"})
    (project / "main.lua").write_text(
        f"""
local db = database "probe" {{ migrations = "migrations/probe" }}
local store = kv "probe"
local q = queue "probe"
local w = workflow "probe" (function(wf)
    local out = {{}}
    for _, m in ipairs({lua_list(sorted(types.methods["lunaflow.Wf"]))}) do out["wf:" .. m] = type(wf[m]) end
    for _, f in ipairs({lua_list(wf_fields)}) do out["wf." .. f] = type(wf[f]) end
    out["wf.step_id"] = wf:step("probe", function() return type(wf.step_id) end)
    return out
end)
on "fetch" (function(request)
    local out = {{}}
    for _, name in ipairs({lua_list(list(SPEC_FUNCTIONS))}) do out[name] = type(_G[name]) end
    for _, path in ipairs({lua_list(paths)}) do
        local t, f = path:match("^(%w+)%.([%w_]+)$")
        out[path] = type(_G[t]) == "table" and type(_G[t][f]) or "nil"
    end
    local run = w:get("nobody")
{probe("run", "run", "lunaflow.Run")}
{probe("workflow", "w", "lunaflow.Workflow")}
{probe("database", "db", "lunaflow.Database")}
{probe("kv", "store", "lunaflow.Kv")}
{probe("queue", "q", "lunaflow.Queue")}
    return {{ status_code = 200, body = json.encode(out) }}
end)
""",
        encoding="utf-8",
    )
    with LocalPlatform(project, data_dir=tmp_path / "data") as p:
        seen = json.loads(p.fetch("GET", "/").body)
        in_run = p.start("probe", None, id="r").result
    handles = ("lunaflow.Run", "lunaflow.Workflow", "lunaflow.Database", "lunaflow.Kv", "lunaflow.Queue")
    expected = (
        len(SPEC_FUNCTIONS) + len(paths) + sum(len(types.methods[c]) + len(types.classes[c]) for c in handles)
    )
    assert len(seen) == expected
    assert len(in_run) == len(types.methods["lunaflow.Wf"]) + len(types.classes["lunaflow.Wf"])
    every = {**seen, **in_run}
    functions = {k for k in every if ":" in k or k in SPEC_FUNCTIONS or k in paths}
    assert {k: v for k, v in every.items() if k in functions and v != "function"} == {}
    # The fields (run.id, run.workflow, workflow.name, wf.id, wf.workflow, wf.step_id) are strings.
    assert {k: v for k, v in every.items() if k not in functions and v != "string"} == {}


# --- lunaflow new installs it ---------------------------------------------------------------------


def test_lunaflow_new_installs_the_annotations_and_a_luarc_that_points_at_them(tmp_path: Path) -> None:
    """types/lunaflow.lua: "`lunaflow new` installs this file and a .luarc.json that points
    at it"."""
    target = tmp_path / "demo"
    scaffold(target)
    installed = target / "types" / "lunaflow.lua"
    assert installed.read_text(encoding="utf-8") == TYPES.read_text(encoding="utf-8")
    luarc = json.loads((target / ".luarc.json").read_text(encoding="utf-8"))
    assert luarc["runtime.version"] == "Lua 5.4"
    libraries = luarc["workspace.library"]
    pointed = {(target / lib).resolve() for lib in libraries}
    assert installed.resolve() in pointed or installed.parent.resolve() in pointed, libraries

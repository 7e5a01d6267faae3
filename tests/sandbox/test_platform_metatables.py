"""Issue 21, point 3: "platform tables have protected metatables" holds for every platform
table, not only handles: ``setmetatable`` on json, crypto, http, Jwt, log and uuid is
refused and ``getmetatable`` answers false. Checked from a fetch handler, where all six are
present (http, crypto and Jwt are absent in run code)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from runtime.testing import LocalPlatform

TABLES = ["json", "crypto", "http", "Jwt", "log", "uuid"]

SCRIPT = """
local names = { "json", "crypto", "http", "Jwt", "log", "uuid" }
local tables = { json = json, crypto = crypto, http = http, Jwt = Jwt, log = log, uuid = uuid }
on "fetch" (function(request)
    local out = {}
    for _, name in ipairs(names) do
        local t = tables[name]
        local ok, err = pcall(setmetatable, t, { __index = function() return "hijacked" end })
        out[name] = {
            set = ok,
            err = tostring(err),
            get = tostring(getmetatable(t)),
            still = type(t.hijacked),
        }
    end
    return { status_code = 200, body = json.encode(out) }
end)
"""


def test_setmetatable_on_every_platform_table_is_refused(
    make_project: Callable[[dict[str, str]], Path], tmp_path: Path
) -> None:
    with LocalPlatform(make_project({"main.lua": SCRIPT}), data_dir=tmp_path / "data") as p:
        answer = p.fetch("GET", "/")
    assert answer.status_code == 200, answer.body
    seen = json.loads(answer.body)
    for name in TABLES:
        assert seen[name]["set"] is False, (name, seen[name])
        assert "cannot change a protected metatable" in seen[name]["err"], (name, seen[name])
        assert seen[name]["get"] == "false", (name, seen[name])
        assert seen[name]["still"] == "nil", (name, seen[name])

"""``lunaflow new NAME``: a project that runs and tests from the first minute: a workflow,
a fetch route, a migration, a Lua test, editor types and a .gitignore for the data folder."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

from runtime.errors import InvalidInput

WORKFLOW = """-- {name}: an order that waits to be approved.
local orders = database "orders" {{ migrations = "migrations/orders" }}

workflow "approve-order" (function(wf, order)
    wf:step("record", function()
        orders:exec("INSERT INTO orders (id, item) VALUES (?, ?) ON CONFLICT (id) DO NOTHING", {{ order.id, order.item }})
    end)

    local approval = wf:await("approved", {{ timeout = "48h" }})
    local state = approval and "approved" or "expired"

    wf:step("close", function()
        orders:exec("UPDATE orders SET state = ? WHERE id = ?", {{ state, order.id }})
    end)
    return {{ state = state, by = approval and approval.by }}
end)
"""

ROUTES = """-- HTTP routes: POST /orders starts a run; POST /orders/approve signals it.
local approve = workflows "approve-order"

local function reply(status, value)
    return {{ status_code = status, headers = {{ ["content-type"] = "application/json" }}, body = json.encode(value) }}
end

-- The request's JSON object, or nil: a body that is not one is the client's mistake (400).
local function body_of(request)
    local ok, body = pcall(json.parse, request.body or "")
    if ok and type(body) == "table" then return body end
    return nil
end

local function valid_id(id)
    return type(id) == "string" and #id <= 64 and id:match("^[%w_-]+$") ~= nil
end

on "fetch" (function(request)
    if request.method == "POST" and request.path == "/orders" then
        local body = body_of(request)
        if not body or not valid_id(body.id) or type(body.item) ~= "string" then
            return reply(400, {{ error = 'send {{"id": "1", "item": "tea"}}: an id of letters, digits, - or _, and an item' }})
        end
        local run = approve:start({{ id = body.id, item = body.item }}, {{ id = "order-" .. body.id }})
        return reply(201, {{ run = run.id }})
    end
    if request.method == "POST" and request.path == "/orders/approve" then
        local body = body_of(request)
        if not body or not valid_id(body.id) then
            return reply(400, {{ error = 'send {{"id": "1", "by": "ada"}}' }})
        end
        local run = approve:get("order-" .. body.id)
        -- A handle's calls fail for a run that does not exist: that is a 404, not a 500.
        if not pcall(run.status, run) then
            return reply(404, {{ error = "no order " .. body.id }})
        end
        local live = run:signal("approved", {{ by = body.by }})
        return reply(live and 202 or 409, {{ delivered = live }})
    end
    return reply(404, {{ error = "no route " .. request.method .. " " .. request.path }})
end)
"""

MIGRATION = """CREATE TABLE orders (
    id TEXT PRIMARY KEY,
    item TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'open'
);
"""

TEST = """-- `lunaflow test {name}` runs these against the project on a fake clock.

test("an approved order is approved", function(p)
    local r = p:fetch("POST", "/orders", {{ body = json.encode({{ id = "1", item = "tea" }}) }})
    assert_eq(r.status_code, 201)
    assert_eq(p:get("order-1").status, "awaiting")
    p:fetch("POST", "/orders/approve", {{ body = json.encode({{ id = "1", by = "ada" }}) }})
    assert_eq(p:get("order-1").result, {{ state = "approved", by = "ada" }})
end)

test("an order nobody approves expires after 48 hours", function(p)
    p:start("approve-order", {{ id = "2", item = "cake" }}, {{ id = "order-2" }})
    p:advance("48h")
    assert_eq(p:get("order-2").result, {{ state = "expired" }})
end)

test("a bad request is a 400, an unknown order a 404", function(p)
    assert_eq(p:fetch("POST", "/orders", {{ body = "{{not json" }}).status_code, 400)
    assert_eq(p:fetch("POST", "/orders", {{ body = json.encode({{ item = "tea" }}) }}).status_code, 400)
    local r = p:fetch("POST", "/orders/approve", {{ body = json.encode({{ id = "nope", by = "ada" }}) }})
    assert_eq(r.status_code, 404)
end)
"""

LUARC = """{
  "runtime.version": "Lua 5.4",
  "workspace.library": ["types"],
  "diagnostics.globals": []
}
"""

GITIGNORE = ".lunaflow/\n"

TOML = "name = {name}\n"  # the name as a JSON string, which TOML reads as a basic string


def scaffold(target: Path) -> list[Path]:
    if target.exists() and any(target.iterdir()):
        raise InvalidInput(
            f"{target} exists and is not empty; lunaflow new makes a fresh folder — pick another name"
        )
    name = target.name
    types = files("runtime.engine").joinpath("lua/types/lunaflow.lua").read_text(encoding="utf-8")
    content = {
        "main.lua": WORKFLOW.format(name=name),
        "routes.lua": ROUTES.format(),
        "migrations/orders/001_orders.sql": MIGRATION,
        "tests/orders_test.lua": TEST.format(name=name),
        "types/lunaflow.lua": types,
        ".luarc.json": LUARC,
        ".gitignore": GITIGNORE,
        "lunaflow.toml": TOML.format(name=json.dumps(name, ensure_ascii=False)),
    }
    created = []
    for relative, text in content.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        created.append(path)
    return created

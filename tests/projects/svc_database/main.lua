-- Database service tests (tests/services/test_database.py).
local shop = database "shop" { migrations = "migrations/shop" }

-- POST { op = "exec" | "query" | "first", sql, params }: the call's result, or its error.
on "fetch" (function(request)
    local q = json.parse(request.body)
    local ok, r = pcall(function() return shop[q.op](shop, q.sql, q.params) end)
    local out = { ok = ok }
    if ok then
        out.value = r
        out.type = type(r)
        if type(r) == "table" then out.len = #r end
    else
        out.error = r
    end
    return { status_code = 200, body = json.encode(out) }
end)

-- Writes inside a step, reads inside another.
workflow "restock" (function(wf, input)
    local inserted = wf:step("insert", function()
        return shop:first("INSERT INTO items (name, qty) VALUES (?, ?) RETURNING id", { input.name, input.qty })
    end)
    local row = wf:step("read", function()
        return shop:first("SELECT name, qty FROM items WHERE id = ?", { inserted.id })
    end)
    return { inserted = inserted, row = row }
end)

-- A database call in the workflow function itself (outside any step), caught.
workflow "outside" (function(wf, input)
    local ok, e = pcall(function() return shop[input.op](shop, "SELECT 1") end)
    return { ok = ok, error = e }
end)

-- The same, not caught: the run fails with the refusal.
workflow "outside-uncaught" (function(wf, input)
    shop:exec("UPDATE items SET qty = 0")
    return "unreachable"
end)

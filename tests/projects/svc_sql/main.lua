-- The one Lua database API on every platform (tests/services/test_sql_api.py, issue 25).
local shop = database "shop" { migrations = "migrations/shop" }

-- POST { op, sql, params, read }: the call's result (or, with read, one field of it), or its error.
on "fetch" (function(request)
    local q = json.parse(request.body)
    local ok, r = pcall(function()
        local result = shop[q.op](shop, q.sql, q.params)
        if q.read then return result[q.read] end
        return result
    end)
    local out = { ok = ok }
    if ok then
        out.value = r
        out.type = type(r)
    else
        out.error = r
    end
    return { status_code = 200, body = json.encode(out) }
end)

-- A statement in a step attempt: the attempt's timeout bounds it, however long the
-- statement waits (tests/services/test_sql_api.py).
workflow "slow_statement" (function(wf, input)
    return wf:step("wait", { timeout = "300ms" }, function()
        return shop:first("SELECT pg_sleep(?) AS slept", { input.seconds })
    end)
end)

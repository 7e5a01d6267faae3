-- kv service tests (tests/services/test_kv.py).
local spaces = { cache = kv "cache", other = kv "other" }

-- POST { ns, op = "get" | "put" | "delete" | "list", args = [...], n = #args }: the call's
-- first result, or its error. `n` keeps nil arguments (put of nil) in place.
on "fetch" (function(request)
    local q = json.parse(request.body)
    local store = spaces[q.ns or "cache"]
    local args = q.args or {}
    local ok, r = pcall(function() return store[q.op](store, table.unpack(args, 1, q.n or #args)) end)
    local out = { ok = ok }
    if ok then
        out.value = r
        out.type = type(r)
        if type(r) == "table" then out.len = #r end
        if type(r) == "number" then out.number = math.type(r) end
    else
        out.error = r
    end
    return { status_code = 200, body = json.encode(out) }
end)

-- kv inside steps: allowed.
workflow "kv-steps" (function(wf, input)
    wf:step("put", function() spaces.cache:put(input.key, input.value) end)
    return wf:step("get", function() return spaces.cache:get(input.key) end)
end)

-- kv in the workflow function itself: refused (caught, so the run reports the error).
workflow "kv-outside" (function(wf, input)
    local cache = spaces.cache
    local calls = {
        get = function() return cache:get("k") end,
        put = function() return cache:put("k", "v") end,
        delete = function() return cache:delete("k") end,
        list = function() return cache:list({}) end,
    }
    local ok, e = pcall(calls[input.op])
    return { ok = ok, error = e }
end)

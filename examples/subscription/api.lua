-- The subscription's routes.
--   POST /subs/<id>         start a 24-month subscription (run "sub-<id>"; a retry joins it)
--   GET  /subs/<id>         its status, result and generation (the month it is in)
--   POST /subs/<id>/cancel  ask it to stop at once: a signal, whatever month it is in
local subscription = workflows "subscription"

local function answer(status, value)
    return { status_code = status, headers = { ["content-type"] = "application/json" }, body = json.encode(value) }
end

on "fetch" (function(request)
    local id = string.match(request.path, "^/subs/([%w-]+)$")
    if id and request.method == "POST" then
        local run = subscription:start({ customer = id, months = 24 }, { id = "sub-" .. id })
        return answer(202, { run = run.id })
    end
    if id and request.method == "GET" then
        local run = subscription:get("sub-" .. id)
        local ok, status = pcall(run.status, run)
        if not ok then return answer(404, { error = "no subscription " .. id }) end
        local gens = run:generations()
        return answer(200, { status = status, result = run:result(), generation = gens.current,
            earlier = #gens.earlier, dropped = gens.dropped })
    end
    id = string.match(request.path, "^/subs/([%w-]+)/cancel$")
    if id and request.method == "POST" then
        subscription:get("sub-" .. id):signal("cancel", {})
        return answer(202, { cancelling = "sub-" .. id })
    end
    return answer(404, { error = "no route" })
end)

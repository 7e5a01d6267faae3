-- Signal-with-start (issue 28.4): runs started together with their first signal.

-- Waits for its payment; a run started with "paid" finds it waiting at once.
local orders = workflow "order" (function(wf, order)
    local paid = wf:await("paid", { timeout = "72h" })
    if paid == nil then return { outcome = "void" } end
    local more = {}
    for i = 1, (order.extra or 0) do more[i] = wf:await("paid").by end
    return { outcome = "paid", by = paid.by, more = #more > 0 and more or nil, n = order.n }
end)

workflow "other" (function(wf, input)
    wf:await("never")
end)

workflow "quick" (function(wf, input)
    return "done"
end)

-- Starts its child with a signal from a step: the child's parent is this run.
workflow "spawner" (function(wf, input)
    wf:step("spawn", function()
        return orders:start({ n = 0 }, { id = input.child, signal = "paid", payload = { by = wf.id } }).id
    end)
    wf:await("done")
end)

-- The route a checkout page calls: one request starts the order and pays it.
on "fetch" (function(request)
    local body = json.parse(request.body)
    if request.path == "/checkout" then
        local run = orders:start({ n = body.n }, { id = "order-" .. body.id, signal = "paid", payload = { by = body.by } })
        return { status_code = 200, body = json.encode({ id = run.id, status = run:status() }) }
    end
    if request.path == "/start" then  -- any options, to see what is refused
        local ok, err = pcall(function()
            return workflows(body.workflow):start(body.input, body.opts).id
        end)
        return { status_code = ok and 200 or 400, body = json.encode({ ok = ok, out = ok and err or tostring(err) }) }
    end
    return { status_code = 404, body = "" }
end)

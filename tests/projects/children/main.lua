-- Workflows for tests/semantics/test_children.py (issue 27.1: child runs as journaled commands).

-- A child that waits for its signal, then answers (or fails, as the signal says).
workflow "charge-card" (function(wf, input)
    local how = wf:await("go")
    if how == "fail" then
        wf:step("charge", function() error("card declined") end)
    end
    return { charged = input.amount, how = how }
end)

-- A child that ends at once.
workflow "echo" (function(wf, input)
    return { echo = input }
end)

-- The parent: one child, its result or its caught failure.
workflow "order" (function(wf, input)
    local c = wf:child("charge-card", { amount = input.amount }, { id = input.child_id })
    local ok, got = pcall(c.result, c, { timeout = input.timeout })
    if ok then return { ok = true, child = c.id, result = got } end
    if type(got) ~= "table" or got.child == nil then error(got, 0) end -- a bug, not a failure
    return { ok = false, child = got.child, status = got.status, message = got.message, text = tostring(got) }
end)

-- Children with derived ids, collected in order.
workflow "fan" (function(wf, input)
    local handles = {}
    for i = 1, input.n do handles[i] = wf:child("echo", i) end
    local out = {}
    for i, c in ipairs(handles) do out[i] = { id = c.id, result = c:result() } end
    return out
end)

-- Uncaught: the child's failure fails the parent with its text.
workflow "uncaught" (function(wf, input)
    return wf:child("charge-card", { amount = 1 }, { id = input.child_id }):result()
end)

-- Bad input, each refused before anything is journaled.
workflow "bad" (function(wf, input)
    if input.case == "unknown" then return wf:child("no-such-flow", {}) end
    if input.case == "bad-id" then return wf:child("echo", {}, { id = "a/b" }) end
    if input.case == "self" then return wf:child("bad", {}, { id = wf.id }) end
    if input.case == "option" then return wf:child("echo", {}, { idd = "x" }) end
    if input.case == "in-step" then
        return wf:step("s", function() return wf:child("echo", {}) end)
    end
    if input.case == "twice" then
        local c = wf:child("echo", 1)
        c:result({ timeout = "1h" })
        return c:result({ timeout = "2h" })
    end
    if input.case == "same-twice" then
        local c = wf:child("echo", 1)
        return { c:result({ timeout = "1h" }), c:result({ timeout = "1h" }) }
    end
end)

-- For lunaflow dev tests: start a run, signal one.
on "fetch" (function(req)
    local body = json.parse(req.body)
    if req.path == "/start" then
        local run = workflows(body.workflow):start(body.input, { id = body.id })
        return { status = 200, body = json.encode({ id = run.id }) }
    end
    if req.path == "/signal" then
        workflows(body.workflow):get(body.id):signal(body.name, body.payload)
        return { status = 200, body = "{}" }
    end
    return { status = 404, body = "{}" }
end)

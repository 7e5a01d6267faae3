-- Workflows for tests/semantics/test_continue_as_new.py (issue 27.3: continue-as-new).

-- A subscription billed once a month for `months` months: each month is one generation,
-- so the journal stays one month long however long the subscription runs.
workflow "subscription" (function(wf, sub)
    local month = sub.month or 1
    wf:step("bill", function()
        return { customer = sub.customer, month = month }
    end)
    if month >= sub.months then
        return { customer = sub.customer, months_billed = month, ended_by = "term" }
    end
    local _, how = wf:race({ "renew", "cancel" }, { timeout = "30d" })
    if how ~= "renew" then
        return { customer = sub.customer, months_billed = month, ended_by = how or "lapsed" }
    end
    return wf:continue_as_new({ customer = sub.customer, months = sub.months, month = month + 1 })
end)

-- Continues with whatever the input names as the next state (bad values are refused).
workflow "bad-continue" (function(wf, input)
    wf:step("before", function() return 1 end)
    if input.kind == "function" then return wf:continue_as_new({ f = function() end }) end
    if input.kind == "in-step" then
        return wf:step("inside", function() return wf:continue_as_new({}) end)
    end
    return wf:continue_as_new({ blob = string.rep("x", 300 * 1024) })
end)

-- Generation 2's step fails until the clock passes `until` (a resume after that succeeds).
workflow "flaky-later" (function(wf, input)
    if input.generation == nil then
        return wf:continue_as_new({ generation = 2, ["until"] = input["until"] })
    end
    return wf:step("late", function()
        if os.time() < input["until"] then error("not yet") end
        return "done"
    end)
end)

-- A month's bill as a child run of its own: "monthly-child" starts one a generation with a
-- derived id, and "monthly-map" maps two a generation, each waiting for its "paid" signal.
workflow "bill" (function(wf, month) return { billed = month } end)
workflow "bill-paid" (function(wf, item)
    wf:await("paid")
    return item
end)

workflow "monthly-child" (function(wf, s)
    local got = wf:child("bill", s.month):result()
    local seen = (s.seen or "") .. got.billed
    if s.month < s.months then
        return wf:continue_as_new({ month = s.month + 1, months = s.months, seen = seen .. " " })
    end
    return seen
end)

workflow "monthly-map" (function(wf, s)
    local got = wf:map({ s.month * 10 + 1, s.month * 10 + 2 }, "bill-paid")
    local seen = (s.seen or "") .. got[1] .. "," .. got[2]
    if s.month < s.months then
        return wf:continue_as_new({ month = s.month + 1, months = s.months, seen = seen .. " " })
    end
    return seen
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

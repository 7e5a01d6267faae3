-- Starts and signals advanced where their request lands (tests/aws/test_eager.py).

-- Parks first: its start's activation is only a park.
workflow "inbox" (function(wf, input)
    local got = wf:await("go")
    return { got = got, input = input }
end)

-- Parks first on a wait longer than SQS's 15-minute delay: its start's activation makes the
-- run's EventBridge Scheduler schedule, in the fetch function.
workflow "patient" (function(wf, input)
    return wf:await("go", { timeout = "2h" })
end)

-- A step first: its start is a worker's; its signal then ends it with no step.
workflow "stepper" (function(wf, input)
    local a = wf:step("a", function() return 1 end)
    local got = wf:await("go")
    return { a = a, got = got }
end)

-- A step whose timeout fits the request's budget (1 s by default, 10 s in the tests): the signal's request
-- runs it, under the lease it takes there, and ends the run.
workflow "quick" (function(wf, input)
    local got = wf:await("go")
    local n = wf:step("count", { timeout = "500ms" }, function() return got.n + 1 end)
    return { n = n }
end)

-- A step whose timeout fits no request's budget (10 s at most): the worker's.
workflow "slow" (function(wf, input)
    local got = wf:await("go")
    local n = wf:step("count", { timeout = "30s" }, function() return got.n + 1 end)
    return { n = n }
end)

-- A quick step, then one with no timeout: the request runs the first and leaves the second.
workflow "mixed" (function(wf, input)
    local got = wf:await("go")
    local a = wf:step("a", { timeout = "500ms" }, function() return got.n end)
    local b = wf:step("b", function() return a * 10 end)
    return { a = a, b = b }
end)

-- A quick step that fails, with a second attempt after a backoff: the request parks the
-- run asleep.
workflow "flaky" (function(wf, input)
    wf:await("go")
    return wf:step("try", { timeout = "500ms", retries = 2, backoff = "1m" }, function()
        error("the attempt fails", 0)
    end)
end)

-- A quick step that never ends: its timeout stops it, in the request as in a worker.
workflow "endless" (function(wf, input)
    wf:await("go")
    return wf:step("spin", { timeout = "200ms" }, function() while true do end end)
end)

-- A quick step whose kv read hangs in AWS: its timeout stops it (tests/aws/test_eager.py).
local box = kv "box"
workflow "kvquick" (function(wf, input)
    wf:await("go")
    -- 1s: the read goes out within it on a loaded machine too (botocore's first GetItem).
    return wf:step("read", { timeout = "1s" }, function() return box:get("k") end)
end)

-- Ends at once or waits, by its input: what its start's activation does depends on the
-- input it reads (tests/aws/test_eager.py, a run created again under its id).
workflow "branchy" (function(wf, input)
    if input.now then return { ended = input.tag } end
    return { got = wf:await("go"), tag = input.tag }
end)

-- A step whose timeout fits the request's budget first: the start's request runs it, under the
-- lease it takes there, then parks (tests/aws/test_pending_starts.py).
workflow "quickfirst" (function(wf, input)
    local a = wf:step("a", { timeout = "500ms" }, function() return 1 end)
    return { a = a, got = wf:await("go") }
end)

local handles = {
    inbox = workflows "inbox", stepper = workflows "stepper", quick = workflows "quick",
    slow = workflows "slow", mixed = workflows "mixed", flaky = workflows "flaky",
    endless = workflows "endless", kvquick = workflows "kvquick", branchy = workflows "branchy",
    patient = workflows "patient", quickfirst = workflows "quickfirst",
}

local function reply(status, value)
    return { status_code = status, headers = { ["content-type"] = "application/json" }, body = json.encode(value) }
end

on "fetch" (function(request)
    local workflow, id = request.path:match("^/start/([%w]+)/([%w%-]+)$")
    if request.method == "POST" and workflow then
        local run = handles[workflow]:start(json.parse(request.body), { id = id })
        if request.headers["x-then-fail"] then error("the handler failed after its start", 0) end
        return reply(201, { run = run.id })
    end
    local started, sid = request.path:match("^/startsignal/([%w]+)/([%w%-]+)$")
    if request.method == "POST" and started then
        local run = handles[started]:start({}, { id = sid })
        return reply(201, { live = run:signal("go", json.parse(request.body)) })
    end
    local to, run_id, name = request.path:match("^/signal/([%w]+)/([%w%-]+)/([%w]+)$")
    if request.method == "POST" and to then
        local live = handles[to]:get(run_id):signal(name, json.parse(request.body))
        return reply(202, { live = live })
    end
    return reply(404, { error = "no route" })
end)

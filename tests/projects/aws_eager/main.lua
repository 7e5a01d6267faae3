-- Starts and signals advanced where their request lands (tests/aws/test_eager.py).

-- Parks first: its start's activation is only a park.
workflow "inbox" (function(wf, input)
    local got = wf:await("go")
    return { got = got, input = input }
end)

-- A step first: its start is a worker's; its signal then ends it with no step.
workflow "stepper" (function(wf, input)
    local a = wf:step("a", function() return 1 end)
    local got = wf:await("go")
    return { a = a, got = got }
end)

local handles = { inbox = workflows "inbox", stepper = workflows "stepper" }

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
    local to, run_id, name = request.path:match("^/signal/([%w]+)/([%w%-]+)/([%w]+)$")
    if request.method == "POST" and to then
        local live = handles[to]:get(run_id):signal(name, json.parse(request.body))
        return reply(202, { live = live })
    end
    return reply(404, { error = "no route" })
end)

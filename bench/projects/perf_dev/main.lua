-- bench/latency.py and bench/scaling.py on `lunaflow dev`: runs started and signalled over
-- HTTP. A "waiter" run waits for "go" n times, so each signal resumes it and it parks again.

local waiter = workflow "waiter" (function(wf, input)
    local got = 0
    for i = 1, input.n do
        local payload = wf:await("go")
        got = got + payload.i
    end
    return { got = got }
end)

local function reply(status, value)
    return { status_code = status, headers = { ["content-type"] = "application/json" }, body = json.encode(value) }
end

on "fetch" (function(request)
    -- POST /start/<id>?n=<waits>  starts a waiter run with that id (joins it if it exists)
    local id = request.path:match("^/start/([^/]+)$")
    if request.method == "POST" and id then
        local run = waiter:start({ n = tonumber(request.query.n) or 1 }, { id = id })
        return reply(201, { run = run.id })
    end
    -- POST /signal/<id>?i=<number>  sends signal "go" with payload { i = number }
    id = request.path:match("^/signal/([^/]+)$")
    if request.method == "POST" and id then
        local live = waiter:get(id):signal("go", { i = tonumber(request.query.i) or 0 })
        return reply(live and 202 or 409, { delivered = live })
    end
    -- GET /status/<id>  the run's status
    id = request.path:match("^/status/([^/]+)$")
    if request.method == "GET" and id then
        return reply(200, { status = waiter:get(id):status() })
    end
    return reply(404, { error = "no route " .. request.method .. " " .. request.path })
end)

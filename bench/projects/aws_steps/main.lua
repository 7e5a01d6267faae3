-- bench/aws_cost.py's workloads: n steps, n signals, n timers. Each ends with one step, so
-- the end of a run costs the same whatever n is and the difference between n and 0 is the
-- cost of the n steps, signals or timers alone.

workflow "steps" (function(wf, input)
    local total = 0
    for i = 1, input.n do
        total = total + wf:step("s", function() return i end)
    end
    return { total = total }
end)

-- The sum of n signals' payloads, each awaited in turn.
local function summed(wf, n)
    local got = 0
    for i = 1, n do
        got = got + wf:await("go").i
    end
    return got
end

workflow "signals" (function(wf, input)
    local got = summed(wf, input.n)
    return wf:step("done", function() return { got = got } end)
end)

-- "signals" whose step declares a timeout that fits a request's budget (`-c eagerMs`, 1 s
-- by default): the signal's request runs the step and ends the run, with no worker.
workflow "quicksignals" (function(wf, input)
    local got = summed(wf, input.n)
    return wf:step("done", { timeout = "500ms" }, function() return { got = got } end)
end)

workflow "timers" (function(wf, input)
    for i = 1, input.n do
        wf:sleep(input.every)
    end
    return wf:step("done", function() return { slept = input.n } end)
end)

-- "steps" behind a concurrency limit (issue 30): the difference is what a slot costs a run
-- (its gate, taking the slot, giving it back at the end).
workflow "limited" { concurrency = { limit = 10 } } (function(wf, input)
    local total = 0
    for i = 1, input.n do
        total = total + wf:step("s", function() return i end)
    end
    return { total = total }
end)

-- Starts and signals arrive over HTTP, as in production (bench/aws_cost.py's all-in
-- workloads): POST /start/<workflow>/<id> with the input, POST /signal/<workflow>/<id>/<name>
-- with the payload.
local function reply(status, value)
    return { status_code = status, headers = { ["content-type"] = "application/json" }, body = json.encode(value) }
end

on "fetch" (function(request)
    local workflow, id = request.path:match("^/start/([%w]+)/([%w%-]+)$")
    if request.method == "POST" and workflow then
        local run = workflows(workflow):start(json.parse(request.body), { id = id })
        return reply(201, { run = run.id })
    end
    local to, run_id, name = request.path:match("^/signal/([%w]+)/([%w%-]+)/([%w]+)$")
    if request.method == "POST" and to then
        return reply(202, { live = workflows(to):get(run_id):signal(name, json.parse(request.body)) })
    end
    return reply(404, { error = "no route " .. request.path })
end)

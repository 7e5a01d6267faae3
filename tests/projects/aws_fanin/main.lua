-- Children and their parents where a request lands (tests/aws/test_runner.py): a child's
-- end or start a request makes wakes another run, which goes to the wake queue, not the runner.

workflow "kid" (function(wf, input)
    local got = wf:await("go")
    return { n = got.n }
end)

workflow "parent" (function(wf, input)
    local hs = {}
    for i = 1, input.n do hs[i] = wf:child("kid", {}, { id = wf.id .. "-k" .. i }) end
    local out = {}
    for i, c in ipairs(hs) do out[i] = c:result() end
    return out
end)

-- A quick step (run in the request, under the lease it takes there), then children.
workflow "qparent" (function(wf, input)
    local a = wf:step("a", { timeout = "300ms" }, function() return 1 end)
    local hs = {}
    for i = 1, input.n do hs[i] = wf:child("kid", {}, { id = wf.id .. "-k" .. i }) end
    return a
end)

-- A step with no timeout first: its start is handed off.
workflow "stepfirst" (function(wf, input)
    return wf:step("a", function() return input.i end)
end)

-- A quick step run in the request, then one with no timeout: the request saves the first
-- and hands the run off.
workflow "quickfirst" (function(wf, input)
    local a = wf:step("a", { timeout = "300ms" }, function() return input.i end)
    return wf:step("b", function() return a * 10 end)
end)

local handles = {
    kid = workflows "kid", parent = workflows "parent", qparent = workflows "qparent",
    stepfirst = workflows "stepfirst", quickfirst = workflows "quickfirst",
}

local function reply(status, value)
    return { status_code = status, headers = { ["content-type"] = "application/json" }, body = json.encode(value) }
end

on "fetch" (function(request)
    local workflow, id = request.path:match("^/start/([%w]+)/([%w%-]+)$")
    if request.method == "POST" and workflow then
        local run = handles[workflow]:start(json.parse(request.body), { id = id })
        return reply(201, { run = run.id })
    end
    local many, prefix, n = request.path:match("^/startmany/([%w]+)/([%w%-]+)/(%d+)$")
    if request.method == "POST" and many then
        for i = 1, tonumber(n) do handles[many]:start({ i = i }, { id = prefix .. "-" .. i }) end
        return reply(201, { started = tonumber(n) })
    end
    local to, run_id, name = request.path:match("^/signal/([%w]+)/([%w%-]+)/([%w]+)$")
    if request.method == "POST" and to then
        local live = handles[to]:get(run_id):signal(name, json.parse(request.body))
        return reply(202, { live = live })
    end
    return reply(404, { error = "no route" })
end)

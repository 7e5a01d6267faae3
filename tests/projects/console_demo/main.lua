-- Workflows for the console tests (tests/console/): the browser test against `lunaflow dev`,
-- the CloudWatch widget under moto, the escaping test and `lunaflow show` against the page.
-- No stand-ins: kv is the real local (or AWS) service.

local flags = kv "flags"

-- "charge-card" always fails: after its 2 attempts the run is failed, with both attempts
-- (their step ids and errors) in the journal.
workflow "charge" (function(wf, input)
    input = input or {}
    wf:step("charge-card", { retries = 2, backoff = "100ms" }, function()
        error("card declined for " .. tostring(input.card), 0)
    end)
    return "charged"
end)

-- "reserve" fails while the kv flag "stock" is unset; once it is set (POST /flag/stock),
-- resuming the failed run completes it.
workflow "restock" (function(wf, input)
    local got = wf:step("reserve", { retries = 2, backoff = "100ms" }, function()
        local stock = flags:get("stock")
        if not stock then error("out of stock", 0) end
        return stock
    end)
    return { reserved = got }
end)

-- Starts a child from a step (so the child records its parent), then awaits "done".
workflow "parent" (function(wf, input)
    wf:step("spawn", function()
        workflows "child":start({ from = wf.id }, { id = wf.id .. "-child" })
        return wf.id .. "-child"
    end)
    wf:await("done")
    return "parent done"
end)

workflow "child" (function(wf, input)
    wf:await("go")
    return "child done"
end)

-- Every kind of timeline item: a sleep its timer ends, an await a signal ends, a step whose
-- first attempt fails and second succeeds, and a step that fails for good.
workflow "review" (function(wf, input)
    wf:sleep("1h")
    local approval = wf:await("approved", { timeout = "24h" })
    wf:step("file", { retries = 2, backoff = "1s" }, function()
        if wf.step_id:match("/1$") then error("disk full on attempt 1", 0) end
        return "filed"
    end)
    wf:step("publish", { retries = 2, backoff = "1s" }, function()
        error("publisher unreachable: " .. tostring(approval and approval.by), 0)
    end)
    return "published"
end)

-- Everything user-controlled comes from the input: the step names, the signal name, the
-- error; the run id and the signal payload come from whoever starts and signals the run.
workflow "hostile" (function(wf, input)
    wf:step(input.step, function() return input.value end)
    wf:step("spawn", function()
        workflows "child":start(input.value, { id = wf.id .. "-child" })
        return true
    end)
    local payload = wf:await(input.signal, { timeout = "1h" })
    wf:step(input.fail_step, function() error(input.error, 0) end)
    return payload
end)

-- The timeline's every shape: a step that fails twice and succeeds on its third attempt
-- (two backoffs), a step whose first attempt times out, a wait a signal ends, a sleep its
-- timer ends, and a wait the run's cancel ends.
workflow "tour" (function(wf, input)
    wf:step("flaky", { retries = 3, backoff = "200ms" }, function()
        if not wf.step_id:match("/3$") then error("flaky on attempt " .. wf.step_id:match("%d+$"), 0) end
        return "steady"
    end)
    wf:step("slow", { retries = 2, timeout = "150ms", backoff = "100ms" }, function()
        if wf.step_id:match("/1$") then while true do end end
        return "in time"
    end)
    local go = wf:await("go", { timeout = "1h" })
    wf:sleep("1s")
    wf:await("never", { timeout = "3d" })
    return go
end)

local function reply(status, value)
    return { status_code = status, headers = { ["content-type"] = "application/json" }, body = json.encode(value) }
end

on "fetch" (function(request)
    -- POST /start/<workflow>/<run id> with the input as a JSON body
    local name, id = request.path:match("^/start/([^/]+)/([^/]+)$")
    if request.method == "POST" and name then
        local input = nil
        if request.body and request.body ~= "" then input = json.parse(request.body) end
        local run = workflows(name):start(input, { id = id })
        return reply(201, { run = run.id, status = run:status() })
    end
    -- POST /flag/<name>: sets a kv flag that a step body reads
    local flag = request.path:match("^/flag/([^/]+)$")
    if request.method == "POST" and flag then
        flags:put(flag, "set by " .. (request.body or ""))
        return reply(200, { flag = flag })
    end
    -- GET /status/<workflow>/<run id>
    name, id = request.path:match("^/status/([^/]+)/([^/]+)$")
    if request.method == "GET" and name then
        -- A run a step is about to start (a child) is not there yet: 404, not an error.
        local ok, status = pcall(function() return workflows(name):get(id):status() end)
        if not ok then return reply(404, { error = "no run " .. id }) end
        return reply(200, { status = status })
    end
    return reply(404, { error = "no route " .. request.path })
end)

-- Workflows for tests/semantics/test_failures.py: issue 26's failure model (catch, errors
-- that must not be retried, the retry policy). `Attempt(wf.id):try(name)` is an object
-- stand-in answering { ok = bool, n = attempt number, fatal = bool }.
local Attempt = objects "Attempt"

local function attempt(wf, name)
    local a = Attempt(wf.id):try(name)
    if a.fatal then error({ retry = false, message = "card declined " .. a.n }) end
    if not a.ok then error("boom " .. a.n, 0) end
    return a.n
end

-- Options come from the input (a missing one is nil); the step's final failure is raised
-- into the workflow, which compensates and reports what it caught.
workflow "caught" (function(wf, opts)
    local ok, err = pcall(wf.step, wf, "charge", {
        retries = opts.retries, backoff = opts.backoff, catch = opts.catch,
        max_backoff = opts.max_backoff, jitter = opts.jitter,
    }, function()
        return attempt(wf, "charge")
    end)
    if ok then return { charged = err } end
    local refunded = wf:step("refund", { retries = 3, backoff = "10s" }, function() return attempt(wf, "refund") end)
    return {
        caught = tostring(err), step = err.step, attempts = err.attempts,
        message = err.message, retry = err.retry, refunded = refunded,
    }
end)

-- The same step, not caught: its raise fails the run with the usual text.
workflow "uncaught" (function(wf, opts)
    local n = wf:step("charge", { retries = opts.retries, backoff = "1s", catch = true }, function()
        return attempt(wf, "charge")
    end)
    return { charged = n }
end)

-- Whatever options the input holds, for the refusals.
workflow "opts" (function(wf, opts)
    return wf:step("charge", opts, function() return attempt(wf, "charge") end)
end)

-- A parent that starts a bounded child from a step, then waits; the child waits forever.
workflow "bounded" (function(wf, input)
    wf:step("spawn", function()
        return workflows("forever"):start({}, { id = wf.id .. "-child" })
    end)
    wf:step("work", { retries = 2, backoff = input.backoff or "1s" }, function()
        return attempt(wf, "work")
    end)
    return wf:await("done")
end)

workflow "forever" (function(wf)
    return wf:await("never")
end)

-- Starts "bounded" with the timeout the request names (a route, as a fetch handler would).
on "fetch" (function(request)
    local body = json.parse(request.body)
    local ok, err = pcall(function()
        return workflows("bounded"):start({}, { id = body.id, timeout = body.timeout })
    end)
    if not ok then return { status_code = 400, body = tostring(err) } end
    return { status_code = 202, body = "" }
end)

-- A workflow-level default bound: every start gets it unless the start names its own.
workflow "bounded-default" { timeout = "2h" } (function(wf)
    return wf:await("never")
end)

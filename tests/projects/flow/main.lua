-- Flow control (concurrency, rates, priority, slow down) for tests/semantics/test_flow.py.
local Api = objects "Api"

-- At most 2 runs per customer and 3 in all hold a slot; each waits for "go" while holding it.
workflow "sync" {
    concurrency = {
        { limit = 2, key = function(input) return input.customer end },
        { limit = 3 },
    },
    priority = function(input) return input.priority or 0 end,
} (function(wf, input)
    wf:await("go")
    return input.n
end)

-- One slot in all; runs end by themselves (a step), or fail when told.
workflow "one" {
    concurrency = { limit = 1 },
    priority = function(input) return input.priority or 0 end,
} (function(wf, input)
    if input.wait then wf:await("go") end
    if input.fail then error("told to fail", 0) end
    return wf:step("work", function() return input.n end)
end)

-- Starts of "paced" go at 1 a second.
workflow "paced" { rate = "1/s" } (function(wf, input)
    return wf:step("stamp", function() return os.time() end)
end)

-- Each call of the step goes at 1 a second, shared by every run (bucket "api").
workflow "caller" (function(wf, input)
    local out = {}
    for i = 1, input.calls do
        out[i] = wf:step("call", { rate = { limit = "1/s", key = "api" } }, function()
            return Api("x"):call(i)
        end)
    end
    return out
end)

-- A step told "slow down" by its third party: retries = 1, yet it succeeds after 2 slow-downs.
workflow "slowed" (function(wf, input)
    return wf:step("charge", { retries = 1 }, function()
        local n = Api("x"):call(0)
        if n <= input.slow then error({ message = "429 too many requests", retry_after = "30s" }) end
        return n
    end)
end)

-- Two runs per customer at a time, each in a step the Api object watches (how many overlap).
workflow "busy" {
    concurrency = { limit = 2, key = function(input) return input.customer end },
} (function(wf, input)
    return wf:step("work", function() return Api(input.customer):work(input.n) end)
end)

-- A document reindexed once its edits stop for 5 s (at most 1 minute after the first edit):
-- the run gets the last edit.
workflow "reindex" { debounce = { window = "5s", key = "doc", max_wait = "1m" } } (function(wf, input)
    return wf:step("index", function() return input end)
end)

-- Every edit of the window, in order (keep = "all").
workflow "audit" { debounce = { window = "5s", key = "doc", keep = "all" } } (function(wf, input)
    return input
end)

-- Events of a user handed to one run: 3 at most, 10 s after the first.
workflow "digest" { batch = { size = 3, window = "10s", key = "user" } } (function(wf, input)
    return wf:step("send", function() return input end)
end)

-- A wide limit: on DynamoDB its 50 slots are spread over two items (one per 25).
workflow "wide" { concurrency = { limit = 50 } } (function(wf, input)
    wf:await("go")
    return input.n
end)

-- For the crash test under lunaflow dev: start and signal runs over HTTP.
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

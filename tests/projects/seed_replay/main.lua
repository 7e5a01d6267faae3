-- Workflows for tests/seed/test_replay.py: the seed's "Replay" section.
-- `Probe(wf.id):look(label)` is a stand-in object: the test sees every call, and can
-- inspect the platform at the moment a step body performs its effect.
local Probe = objects "Probe"

workflow "sleeper" (function(wf)
    wf:step("before", function() return Probe(wf.id):look("before") end)
    wf:sleep("1h")
    wf:step("after", function() return Probe(wf.id):look("after") end)
    return "slept"
end)

workflow "awaiter" (function(wf)
    local payload = wf:await("go", { timeout = "1h" })
    wf:step("after", function() return Probe(wf.id):look("after") end)
    return { payload = payload, timed_out = payload == nil }
end)

workflow "racer" (function(wf)
    local payload, which = wf:race({ "a", "b" }, { timeout = "1h" })
    wf:step("after", function() return Probe(wf.id):look("after") end)
    return { payload = payload, which = which }
end)

workflow "aller" (function(wf)
    local a, b = wf:all({ "a", "b" }, { timeout = "1h" })
    wf:step("after", function() return Probe(wf.id):look("after") end)
    return { a = a, b = b }
end)

-- A step that fails until the stand-in says otherwise.
workflow "fragile" (function(wf)
    wf:step("charge", function()
        local ok = Probe(wf.id):look("charge")
        if not ok then error("card declined", 0) end
    end)
    return "charged"
end)

-- run:cancel from inside the run's own step body: the run is `running` when cancelled.
local selfcancel = workflow "selfcancel" (function(wf)
    wf:step("cancel-me", function()
        Probe(wf.id):look("cancel-me")
        workflows("selfcancel"):get(wf.id):cancel()
    end)
    wf:step("never", function() return Probe(wf.id):look("never") end)
    return "not reached"
end)

-- Replay from the top: the log line outside any step runs on every replay; the step
-- body runs once, and its recorded value comes back afterwards.
workflow "counter" (function(wf, input)
    log.info("top of counter", { run = wf.id })
    local n = wf:step("count", function() return Probe(wf.id):look("count") end)
    local payload = wf:await("go")
    local m = wf:step("count-again", function() return Probe(wf.id):look("count-again") end)
    return { n = n, m = m, payload = payload }
end)

-- Same path given the same journal: values drawn in run code are journaled.
workflow "drawer" (function(wf)
    local r = math.random()
    local k = math.random(1, 1000000)
    local u = uuid.v4()
    local t = os.time()
    local c = os.clock()
    local s = secret "api-key"
    log.info("drew", { r = r, k = k, u = u, t = t, s = s })
    wf:await("go")
    return { r = r, k = k, u = u, t = t, c = c, s = s }
end)

-- Reach the network by calling an object from a step.
local Registrar = objects "Registrar"
workflow "signer" (function(wf, payload)
    local receipt = wf:step("sign", function()
        return Registrar("desk"):sign(payload)
    end)
    wf:await("go")
    return receipt
end)

-- Refused in run code (each workflow tries one thing and reports the error).
local store = kv "cache"
local sales = database "sales" { migrations = "migrations/sales" }
workflow "refused" (function(wf, what)
    local attempts = {
        ["os.date"] = function() return os.date("%Y") end,
        ["math.randomseed"] = function() return math.randomseed(42) end,
        ["kv"] = function() return store:put("k", "v") end,
        ["database"] = function() return sales:exec("SELECT 1", {}) end,
        ["object"] = function() return Probe(wf.id):look("outside") end,
    }
    local ok, err = pcall(attempts[what])
    return { ok = ok, err = tostring(err) }
end)

workflow "absent" (function(wf)
    local in_body = wf:step("look", function()
        return { http = type(http), crypto = type(crypto), Jwt = type(Jwt) }
    end)
    return { run = { http = type(http), crypto = type(crypto), Jwt = type(Jwt) }, body = in_body }
end)

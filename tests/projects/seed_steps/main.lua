-- Workflows for tests/seed/test_steps.py: the seed's "Steps" section.
-- `Attempt(wf.id):try(name)` is an object stand-in answering { ok = bool, n = attempt number }.
local Attempt = objects "Attempt"

local function attempt(wf, name)
    local a = Attempt(wf.id):try(name)
    if not a.ok then error("boom " .. a.n, 0) end
    return a.n
end

-- Options come from the input, so one workflow covers every combination; a missing
-- option is nil, exactly as if the table had left it out.
workflow "retry" (function(wf, opts)
    local n = wf:step("flaky", { retries = opts.retries, backoff = opts.backoff }, function()
        return attempt(wf, "flaky")
    end)
    return { succeeded_on = n }
end)

-- The two-argument form: no options at all.
workflow "plain" (function(wf)
    local n = wf:step("plain", function() return attempt(wf, "plain") end)
    return { succeeded_on = n }
end)

workflow "spin" (function(wf)
    wf:step("spin", { timeout = "50ms" }, function()
        while true do end
    end)
    return "unreachable"
end)

-- A body that tries to outlast its timeout by catching the error.
workflow "stubborn" (function(wf)
    wf:step("stubborn", { timeout = "50ms" }, function()
        while true do
            pcall(function() while true do end end)
        end
    end)
    return "unreachable"
end)

-- A timeout bounds one attempt; the next attempt gets its own.
workflow "slow-then-fast" (function(wf)
    local n = wf:step("slow", { retries = 2, timeout = "50ms" }, function()
        local a = Attempt(wf.id):try("slow")
        if not a.ok then while true do end end
        return a.n
    end)
    return { succeeded_on = n }
end)

-- The workflow tries to catch a step's final failure (and an attempt's failure).
workflow "catcher" (function(wf, opts)
    local ok, err = pcall(function()
        return wf:step("doomed", { retries = opts.retries, backoff = "1s" }, function()
            return attempt(wf, "doomed")
        end)
    end)
    wf:step("after-catch", function() return Attempt(wf.id):try("after-catch") end)
    return { ok = ok, err = tostring(err) }
end)

-- wf:step returns every value the body returned.
local function counted(...)
    return select("#", ...), ...
end

workflow "multi" (function(wf)
    local n, a, b, c, d = counted(wf:step("multi", function() return 1, nil, "three", nil end))
    local none = counted(wf:step("none", function() end))
    local one = counted(wf:step("one-nil", function() return nil end))
    local t = wf:step("table", function() return { list = { 1, 2 }, name = "x", int = 3, float = 1.5 } end)
    wf:await("go")
    return {
        n = n, a = a, b_is_nil = b == nil, c = c, d_is_nil = d == nil,
        none = none, one = one, t = t, int_type = math.type(t.int), float_type = math.type(t.float),
    }
end)

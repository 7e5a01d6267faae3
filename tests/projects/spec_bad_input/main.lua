-- Refused calls after some progress (SPEC 3: bad input never corrupts a run).
-- Every workflow runs step "a", waits for "go", then makes one refused call.
local function prelude(wf)
    wf:step("a", function() return "a" end)
    wf:await("go")
end

workflow "sink" (function(wf, input)
    local d = wf:await("data")
    return { got = d }
end)

workflow "bad-sleep" (function(wf, input)
    prelude(wf)
    wf:sleep("soon")
    return "done"
end)

workflow "bad-await-timeout" (function(wf, input)
    prelude(wf)
    wf:await("x", { timeout = "forever" })
    return "done"
end)

workflow "bad-race-timeout" (function(wf, input)
    prelude(wf)
    wf:race({ "x", "y" }, { timeout = "1 hour" })
    return "done"
end)

workflow "bad-retries" (function(wf, input)
    prelude(wf)
    wf:step("b", { retries = "three" }, function() return "b" end)
    return "done"
end)

workflow "bad-backoff" (function(wf, input)
    prelude(wf)
    wf:step("b", { retries = 2, backoff = "fast" }, function() return "b" end)
    return "done"
end)

workflow "bad-timeout" (function(wf, input)
    prelude(wf)
    wf:step("b", { timeout = "30 seconds" }, function() return "b" end)
    return "done"
end)

workflow "fn-result" (function(wf, input)
    prelude(wf)
    wf:step("b", function() return function() end end)
    return "done"
end)

workflow "big-result" (function(wf, input)
    prelude(wf)
    wf:step("b", function() return string.rep("x", 300 * 1024) end)
    return "done"
end)

workflow "bad-child-id" (function(wf, input)
    prelude(wf)
    wf:step("b", function() return workflows "sink":start({}, { id = "a/b" }).id end)
    return "done"
end)

workflow "big-signal" (function(wf, input)
    prelude(wf)
    wf:step("b", function() local ok = workflows "sink":get("sink-1"):signal("data", string.rep("x", 300 * 1024)); return ok end)
    return "done"
end)

-- The same workflows with each refused call fixed, for deploy + resume.
-- Every workflow runs step "a", waits for "go", then makes the fixed call.
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
    wf:sleep("1s")
    return "done"
end)

workflow "bad-await-timeout" (function(wf, input)
    prelude(wf)
    wf:await("x", { timeout = "1s" })
    return "done"
end)

workflow "bad-race-timeout" (function(wf, input)
    prelude(wf)
    wf:race({ "x", "y" }, { timeout = "1s" })
    return "done"
end)

workflow "bad-retries" (function(wf, input)
    prelude(wf)
    wf:step("b", { retries = 3 }, function() return "b" end)
    return "done"
end)

workflow "bad-backoff" (function(wf, input)
    prelude(wf)
    wf:step("b", { retries = 2, backoff = "1s" }, function() return "b" end)
    return "done"
end)

workflow "bad-timeout" (function(wf, input)
    prelude(wf)
    wf:step("b", { timeout = "30s" }, function() return "b" end)
    return "done"
end)

workflow "fn-result" (function(wf, input)
    prelude(wf)
    wf:step("b", function() return "b" end)
    return "done"
end)

workflow "big-result" (function(wf, input)
    prelude(wf)
    wf:step("b", function() return string.rep("x", 10) end)
    return "done"
end)

workflow "bad-child-id" (function(wf, input)
    prelude(wf)
    wf:step("b", function() return workflows "sink":start({}, { id = "a-b" }).id end)
    return "done"
end)

workflow "big-signal" (function(wf, input)
    prelude(wf)
    wf:step("b", function() local ok = workflows "sink":get("sink-1"):signal("data", "small"); return ok end)
    return "done"
end)

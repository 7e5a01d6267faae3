-- Workflows that consume signals in ways the tests observe.

-- Sleeps first, so signals sent meanwhile arrive before the run waits for them.
workflow "late-waiter" (function(wf, input)
    wf:sleep("1h")
    local got = {}
    for i = 1, input.waits do
        got[i] = wf:await("paid", { timeout = "1h" }) or "timeout"
    end
    return got
end)

-- Consumes "paid" once, then keeps going: extras must not disturb it.
workflow "pay-once" (function(wf, input)
    local p = wf:await("paid")
    local stamp = wf:step("after", function() return "stepped" end)
    wf:sleep("1h")
    return { p = p, stamp = stamp }
end)

workflow "quick" (function(wf, input)
    return "done"
end)

workflow "breaks" (function(wf, input)
    wf:step("boom", function() error("boom") end)
end)

-- Times out, then sleeps: a "paid" arriving after the timeout must not rewrite the past.
workflow "late-signal" (function(wf, input)
    local p = wf:await("paid", { timeout = "1h" })
    wf:sleep("1h")
    return { p = p, timed_out = p == nil }
end)

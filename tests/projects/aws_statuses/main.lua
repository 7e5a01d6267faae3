-- Runs at rest in every status, for the status index (tests/aws/test_status_index.py).

-- Awaiting a signal; then a step, and the end.
workflow "wait" (function(wf, input)
    local got = wf:await("go")
    local n = wf:step("count", function() return #input end)
    return { got = got, n = n }
end)

-- Sleeping an hour.
workflow "nap" (function(wf, input)
    wf:sleep("1h")
    return "rested"
end)

-- Failed (resumable) after its first step.
workflow "boom" (function(wf, input)
    wf:step("first", function() return 1 end)
    error("boom", 0)
end)

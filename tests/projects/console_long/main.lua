-- Long runs for the console's timeline (tests/console/test_timeline_chart.py): a wait of
-- days between two steps, thousands of steps, and more step names than the chart has lanes.

workflow "patient" (function(wf, input)
    wf:step("before", function() return 1 end)
    wf:sleep("20s")
    local got = wf:await("answer", { timeout = "7d" })
    wf:step("after", function() return got end)
    return got
end)

workflow "busy" (function(wf, input)
    for i = 1, input.n do
        wf:step("tick", function() return i end)
    end
    return input.n
end)

workflow "many" (function(wf, input)
    for i = 1, input.n do
        wf:step("step-" .. i, function() return i end)
    end
    return input.n
end)

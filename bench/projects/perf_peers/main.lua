-- bench/peers.py's workloads, the same in lunaflow, DBOS and the AWS durable runner:
-- n sequential steps (each returns its pass number), and n waits for a signal.

workflow "steps" (function(wf, input)
    local total = 0
    for i = 1, input.n do
        total = total + wf:step("s", function() return i end)
    end
    return { total = total }
end)

workflow "waiter" (function(wf, input)
    local got = 0
    for i = 1, input.n do
        local payload = wf:await("go")
        got = got + payload.i
    end
    return { got = got }
end)

-- Waiting verbs (seed "Waiting"): sleep, await, race, all.

workflow "sleeper" (function(wf, input)
    local r = table.pack(wf:sleep(input.d))
    return { n = r.n }
end)

workflow "awaiter" (function(wf, input)
    local r = table.pack(wf:await("approved", { timeout = input.timeout or "48h" }))
    local payload = r[1]
    return { got = payload, timed_out = payload == nil, n = r.n }
end)

workflow "racer" (function(wf, input)
    if input.nap then wf:sleep(input.nap) end
    local payload, which = wf:race({ "paid", "cancelled" }, { timeout = "72h" })
    local later = nil
    if input.then_await then
        later = wf:await(input.then_await, { timeout = "1h" })
    end
    return {
        payload = payload, which = which,
        payload_nil = payload == nil, which_nil = which == nil,
        later = later, later_nil = later == nil,
    }
end)

workflow "gatherer" (function(wf, input)
    if input.nap then wf:sleep(input.nap) end
    local r = table.pack(wf:all({ "shipped", "received" }, { timeout = input.timeout or "7d" }))
    local a, b = r[1], r[2]
    return { shipped = a, received = b, shipped_nil = a == nil, received_nil = b == nil, n = r.n }
end)

-- A run that parks three ways in a row: sleep, await, then race.
workflow "parker" (function(wf, input)
    local s = wf:step("before", function() return "stepped" end)
    wf:sleep("1h")
    local approved = wf:await("approved", { timeout = "48h" })
    local payload, which = wf:race({ "paid", "cancelled" }, { timeout = "72h" })
    return { s = s, approved = approved, payload = payload, which = which }
end)

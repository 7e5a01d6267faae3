-- Workflows for tests/cancel/ (issue 24.2: a cancel always finishes).

-- A test's hook into the middle of a step: a stand-in for this kv sees each put.
local gate = kv "gate"

-- Waits for a signal that never comes: a live child, until something cancels it.
workflow "leaf" (function(wf)
    wf:await("go")
    return "went"
end)

-- One step starts `n` leaves; before leaf `at` it tells the test (which cancels this run
-- then). A start refused because the run was cancelled is caught and the loop goes on, as
-- a stubborn step would: no leaf it starts may live.
workflow "fanout" (function(wf, input)
    wf:step("spawn", function()
        local refused = 0
        for i = 1, input.n do
            if i == input.at then gate:put("cancel", wf.id) end
            local ok = pcall(function()
                workflows "leaf":start(nil, { id = wf.id .. "-" .. i })
            end)
            if not ok then refused = refused + 1 end
        end
        return refused
    end)
    wf:await("done")
    return "fanned out"
end)

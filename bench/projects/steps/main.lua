-- The benchmark's workflows (bench/steps.py). One step per loop pass; the step name is
-- the same on every pass, so each pass is its own effect (pass counts up).

workflow "loop" (function(wf, input)
    local total = 0
    for i = 1, input.n do
        total = total + wf:step("s", function() return i end)
    end
    return { total = total }
end)

-- n steps, then a wait: with n = 999 the parked journal holds 1 + 2 * 999 + 1 = 2,000 entries.
workflow "parked" (function(wf, input)
    local total = 0
    for i = 1, input.n do
        total = total + wf:step("s", function() return i end)
    end
    local go = wf:await("go")
    return { total = total, go = go }
end)

-- More work than one invocation's time (tests/aws/test_handlers_worker.py): each step
-- spends CPU time, so a short Lambda deadline falls between steps.
local function spin(seconds)
    local start = os.clock()
    while os.clock() - start < seconds do end
end

workflow "long" (function(wf, input)
    local done = {}
    for i = 1, input.steps do
        done[i] = wf:step("part-" .. i, function()
            spin(input.spin)
            log.info("part ran", { part = i })
            return i
        end)
    end
    return { parts = #done }
end)

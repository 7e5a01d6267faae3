-- More work than one invocation's time (tests/aws/test_handlers_worker.py): each step
-- spends CPU time, so a short Lambda deadline falls between steps (``spin_first``: the
-- first step's own).
local function spin(seconds)
    local start = os.clock()
    while os.clock() - start < seconds do end
end

workflow "long" (function(wf, input)
    local done = {}
    for i = 1, input.steps do
        done[i] = wf:step("part-" .. i, function()
            spin(i == 1 and input.spin_first or input.spin)
            log.info("part ran", { part = i })
            return i
        end)
    end
    return { parts = #done }
end)

-- bench/flow.py: runs through a concurrency limit per key; each holds its slot for one object call.
local Work = objects "Work"

workflow "limited" {
    concurrency = { limit = 10, key = function(input) return input.key end },
} (function(wf, input)
    return wf:step("work", function() return Work(input.key):run(input.n) end)
end)

workflow "free" (function(wf, input)
    return wf:step("work", function() return Work(input.key):run(input.n) end)
end)

-- Children: the parent starts a child from a step (the id joins on a repeat) and awaits
-- the child's signal; the child works, sleeps and signals its parent from a step (a repeat
-- of that step after a crash sends a duplicate, which is set aside).
local effect = require "lib.effect"

workflow "parent" (function(wf, input)
    local child = wf:step("spawn", function()
        effect(wf, input)
        return workflows("child"):start({ parent = wf.id, ledger = input.ledger, k = input.k }, { id = wf.id .. "-c" }).id
    end)
    local done = wf:await("child_done", { timeout = "1h" })
    local doubled = wf:step("finish", function()
        effect(wf, input)
        return done.v * 2
    end)
    return { child = child, v = done.v, doubled = doubled }
end)

workflow "child" (function(wf, input)
    local s = 0
    for i = 1, 3 do
        s = s + wf:step("work", function()
            effect(wf, input)
            return i * input.k
        end)
    end
    wf:sleep("100ms")
    wf:step("notify", function()
        effect(wf, input)
        workflows("parent"):get(input.parent):signal("child_done", { v = s })
    end)
    return { s = s }
end)

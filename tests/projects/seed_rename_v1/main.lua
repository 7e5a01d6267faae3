-- Version 1 (tests/seed/test_gotchas.py): the names runs in flight were journaled under.
local Effect = objects "Effect"

workflow "rename" (function(wf)
    wf:step("settle", function() return Effect(wf.id):did("settle-v1") end)
    local go = wf:await("go")
    return { version = 1, go = go }
end)

workflow "waiter" (function(wf)
    local paid = wf:await("paid", { timeout = "72h" })
    wf:step("record", function() return Effect(wf.id):did("record-v1") end)
    return { version = 1, paid = paid }
end)

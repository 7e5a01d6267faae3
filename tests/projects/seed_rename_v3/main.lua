-- Version 3 (tests/seed/test_gotchas.py): the fix. The journaled names are back, and the
-- code after them is new, so a resumed run shows it replayed on this version.
local Effect = objects "Effect"

workflow "rename" (function(wf)
    wf:step("settle", function() return Effect(wf.id):did("settle-v3") end)
    local go = wf:await("go")
    wf:step("audit", function() return Effect(wf.id):did("audit-v3") end)
    return { version = 3, go = go }
end)

workflow "waiter" (function(wf)
    local paid = wf:await("paid", { timeout = "72h" })
    wf:step("record", function() return Effect(wf.id):did("record-v3") end)
    return { version = 3, paid = paid }
end)

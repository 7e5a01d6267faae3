-- Version 2 (tests/seed/test_gotchas.py): step 'settle' renamed to 'other', and the
-- waiter sleeps before it awaits. Both break runs already in flight.
local Effect = objects "Effect"

workflow "rename" (function(wf)
    wf:step("other", function() return Effect(wf.id):did("other-v2") end)
    local go = wf:await("go")
    return { version = 2, go = go }
end)

workflow "waiter" (function(wf)
    wf:sleep("1h")
    local paid = wf:await("paid", { timeout = "72h" })
    wf:step("record", function() return Effect(wf.id):did("record-v2") end)
    return { version = 2, paid = paid }
end)

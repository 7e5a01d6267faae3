-- tests/projects/on_cancel's "order" with its wf:on_cancel dropped: runs that registered the
-- handler diverge on it (lunaflow check reports them before a deploy).
local Ledger = objects "Ledger"

workflow "order" (function(wf, o)
    local hold = wf:step("reserve", function() return Ledger(wf.id):note("reserve") end)
    wf:await("paid")
    return wf:step("ship", function() return Ledger(wf.id):note("ship") end)
end)

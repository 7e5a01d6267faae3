-- Version 2 (tests/tools/test_deploy_guard.py): step 'reserve' renamed to 'hold', which
-- breaks the runs version 1 left waiting.
local Stock = objects "Stock"

workflow "order" (function(wf, order)
    wf:step("hold", function() return Stock(order.item):take() end)
    local paid = wf:await("paid", { timeout = "72h" })
    return { paid = paid ~= nil }
end)

object "Stock" {
    take = function(self)
        self.state.taken = (self.state.taken or 0) + 1
        return self.state.taken
    end,
}

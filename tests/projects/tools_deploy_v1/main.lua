-- Version 1 (tests/tools/test_deploy_guard.py): the code runs in flight were started on.
local Stock = objects "Stock"

workflow "order" (function(wf, order)
    wf:step("reserve", function() return Stock(order.item):take() end)
    local paid = wf:await("paid", { timeout = "72h" })
    return { paid = paid ~= nil }
end)

object "Stock" {
    take = function(self)
        self.state.taken = (self.state.taken or 0) + 1
        return self.state.taken
    end,
}

-- Version 3 (tests/tools/test_deploy_guard.py): a compatible change — the recorded steps
-- keep their names and order; a new step comes after the wait the runs are parked on.
local Stock = objects "Stock"

workflow "order" (function(wf, order)
    wf:step("reserve", function() return Stock(order.item):take() end)
    local paid = wf:await("paid", { timeout = "72h" })
    wf:step("receipt", function() return "sent" end)
    return { paid = paid ~= nil, receipt = true }
end)

object "Stock" {
    take = function(self)
        self.state.taken = (self.state.taken or 0) + 1
        return self.state.taken
    end,
}

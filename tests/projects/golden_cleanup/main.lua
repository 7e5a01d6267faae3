-- The code tests/golden/journals/midflight_cleanup.json was recorded under (issue 26): a
-- cleanup on cancel (wf:on_cancel) whose first step fails once, so the golden is parked in
-- its backoff mid-cleanup. Frozen like tests/projects/golden_order: change it only together
-- with its golden.
local Warehouse = objects "Warehouse"

workflow "order-cleanup" (function(wf, order)
    local hold = wf:step("reserve", function() return Warehouse(order.sku):reserve(order.qty, wf.step_id) end)
    wf:on_cancel({ timeout = "1h" }, function()
        wf:step("release", { retries = 3, backoff = "1s" }, function()
            if wf.step_id:sub(-2) == "/1" then error("warehouse busy", 0) end
            return Warehouse(order.sku):reserve(0, wf.step_id)
        end)
    end)
    wf:await("paid")
    return hold
end)

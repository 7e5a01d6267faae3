-- The code the golden journals in tests/golden/journals/ were recorded under.
-- Its sequence of steps, waits and journaled values is frozen: the committed journals
-- replay against it on every test run. Change it only together with the goldens
-- (python3 tests/golden/make_golden.py).
local Warehouse = objects "Warehouse"

workflow "order" (function(wf, order)
    -- Attempt 1 always fails, so every golden holds a retry after a backoff.
    local hold = wf:step("reserve", { retries = 3, backoff = "1s" }, function()
        if wf.step_id:sub(-2) == "/1" then
            error("warehouse busy", 0)
        end
        return Warehouse(order.sku):reserve(order.qty, wf.step_id)
    end)

    local payment = wf:await("paid", { timeout = "1h" })
    if payment == nil then
        return { outcome = "unpaid", hold = hold }
    end

    wf:sleep("10m")
    local shipped_at = os.time()

    local parcel = wf:step("ship", function()
        return Warehouse(order.sku):ship(hold.hold_id, wf.step_id)
    end)

    return { outcome = "shipped", paid_by = payment.by, hold = hold, parcel = parcel, shipped_at = shipped_at }
end)

-- The code tests/golden/journals/midflight_caught.json was recorded under (issue 26): a
-- step's final failure raised into the workflow (catch = true) and compensated. Frozen like
-- tests/projects/golden_order: change it only together with its golden.
local Warehouse = objects "Warehouse"

workflow "order-saga" (function(wf, order)
    -- Attempt 1 fails and is retried; attempt 2's error says retry = false: the raise.
    local ok, failure = pcall(wf.step, wf, "charge", { retries = 3, backoff = "1s", catch = true }, function()
        if wf.step_id:sub(-2) == "/1" then error("card busy", 0) end
        error({ retry = false, message = "card declined" })
    end)
    assert(not ok, "the charge always fails")
    -- The compensation fails once too, so the golden is parked in its backoff.
    local hold = wf:step("release", { retries = 2, backoff = "1s" }, function()
        if wf.step_id:sub(-2) == "/1" then error("warehouse busy", 0) end
        return Warehouse(order.sku):reserve(0, wf.step_id)
    end)
    return { outcome = "declined", reason = failure.message, attempts = failure.attempts,
        retry = failure.retry, text = tostring(failure), hold = hold }
end)

-- Used by tests/e2e/test_crash.py through tests/e2e/crash_driver.py, in real processes.
-- The step body hands wf.step_id to the Ledger stand-in, which appends it to a file (the
-- effect the outside world sees) and may hang there until the process is killed.
local Ledger = objects "Ledger"

workflow "charge" (function(wf, order)
    local receipt = wf:step("charge", { retries = 3, backoff = "1s" }, function()
        local id = wf.step_id
        Ledger("effects"):record(id)
        if order.fail_first and id:sub(-2) == "/1" then
            error("card declined", 0)
        end
        return "receipt:" .. id
    end)
    return { receipt = receipt, amount = order.amount }
end)

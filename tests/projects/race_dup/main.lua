-- Duplicate-delivery tests (tests/aws_races/test_duplicates.py). Each step body counts
-- its run in the Ledger object, outside the journal.

object "Ledger" {
    ran = function(self, step_id)
        local runs = self.state.runs or {}
        runs[step_id] = (runs[step_id] or 0) + 1
        self.state.runs = runs
        return runs[step_id]
    end,
}

local Ledger = objects "Ledger"

-- Every kind of wake: the start, a timer past SQS's 15 minutes (a Scheduler entry), a
-- signal (with a timeout that stays pending on SQS after the signal wins), a short timer
-- (an SQS delayed message).
workflow "order" (function(wf, input)
    local qty = wf:step("reserve", function()
        Ledger(wf.id):ran(wf.step_id)
        return input.qty
    end)
    wf:sleep("1h")
    local paid = wf:await("paid", { timeout = "10m" })
    local by = wf:step("ship", function()
        Ledger(wf.id):ran(wf.step_id)
        return paid and paid.by or "nobody"
    end)
    wf:sleep("5m")
    local closed = wf:step("close", function()
        Ledger(wf.id):ran(wf.step_id)
        return os.time()
    end)
    return { qty = qty, by = by, closed = closed }
end)

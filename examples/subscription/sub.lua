-- A 24-month subscription: each month bills once, waits a month (or a cancel), then hands
-- its state to a fresh generation with wf:continue_as_new. The run id never changes, so
-- the route /subs/<id>/cancel keeps reaching it; each month's journal is a few entries.
workflow "subscription" (function(wf, sub)
    local month = sub.month or 1
    local receipt = wf:step("bill", { retries = 3 }, function()
        -- wf.step_id names this month's charge: a later generation's ids name it too.
        return { customer = sub.customer, month = month, charge = wf.step_id }
    end)
    if month >= sub.months then
        return { customer = sub.customer, months_billed = month, ended_by = "term", last = receipt.charge }
    end
    local _, why = wf:race({ "cancel" }, { timeout = "30d" })
    if why == "cancel" then
        return { customer = sub.customer, months_billed = month, ended_by = "cancel" }
    end
    return wf:continue_as_new({ customer = sub.customer, months = sub.months, month = month + 1 })
end)

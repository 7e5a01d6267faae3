-- Workflows for tests/seed/test_effect_safety.py: the seed's "Making an effect safe to
-- repeat". `Payments("desk"):charge(amount, step_id)` is an object stand-in that records
-- the step id each effect was performed under; it answers { declined = true } when the
-- test wants the attempt to fail.
local Payments = objects "Payments"
local Receipts = objects "Receipts"

local function charge(wf, amount)
    local r = Payments("desk"):charge(amount, wf.step_id)
    if r.declined then error("declined", 0) end
    return r
end

workflow "charge" (function(wf, sale)
    local receipt = wf:step("charge", { retries = 3, backoff = "1s" }, function()
        return charge(wf, sale.price)
    end)
    return receipt
end)

-- The seed's example body, word for word, reached again in a loop.
workflow "loop" (function(wf, sale)
    local out = {}
    for pass = 1, 3 do
        out[pass] = wf:step("charge", { retries = 3 }, function()
            return Payments("desk"):charge(sale.price, wf.step_id)
        end)
        wf:step("between", function() return pass end)
    end
    return out
end)

-- A loop whose passes are retried too.
workflow "loop-retry" (function(wf, sale)
    for pass = 1, 2 do
        wf:step("charge", { retries = 2, backoff = "1s" }, function() return charge(wf, pass) end)
    end
    return "done"
end)

-- The step id as an object key: the same string recognises a repeat anywhere.
workflow "keyed" (function(wf, order)
    return wf:step("receipt", function()
        return Receipts(wf.step_id):put(order)
    end)
end)

-- wf.step_id read by the workflow function itself.
workflow "outside" (function(wf)
    local ok, err = pcall(function() return wf.step_id end)
    wf:step("some-step", function() return wf.step_id end)
    local ok_after, err_after = pcall(function() return wf.step_id end)
    return { ok = ok, err = err, ok_after = ok_after, err_after = err_after }
end)

workflow "outside-raw" (function(wf)
    local id = wf.step_id
    return id
end)

-- A step body that cannot see the run's id except through wf.step_id still names it.
workflow "shape" (function(wf)
    return wf:step("charge", function() return wf.step_id end)
end)

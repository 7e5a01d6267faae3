-- Paying for a sale: charge the winner, have the registrar sign the receipt, then tell the
-- sale's run it is paid. The run id "pay-<sale id>" makes a double-clicked Pay button join
-- the same run instead of charging twice; wf.step_id makes a charge repeated after a crash
-- recognisable to Payments.
local settle = workflows "settle-sale"
local Payments = objects "Payments"
local Registrar = objects "Registrar"

workflow "pay-sale" (function(wf, payment)
    local receipt = wf:step("charge", { retries = 3, backoff = "1s" }, function()
        return Payments("desk"):charge(payment.price, wf.step_id)
    end)

    local signature = wf:step("sign", function()
        return Registrar("desk"):sign({ sale = payment.id, receipt = receipt.id })
    end)

    wf:step("tell-sale", function()
        settle:get("sale-" .. payment.id):signal("paid", { by = payment.user, receipt = receipt.id })
    end)

    return { receipt = receipt.id, signature = signature }
end)

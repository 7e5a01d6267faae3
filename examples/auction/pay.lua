-- Paying for a sale: hold the sale, charge the winner, have the registrar sign the receipt,
-- then tell the sale's run it is paid. The run id "pay-<sale id>" makes a double-clicked Pay
-- button join the same run instead of charging twice; wf.step_id makes a charge repeated
-- after a crash recognisable to Payments.
--
-- Money moves only for a sale that can still be paid. "hold" moves the sale from open to
-- paying in one conditional update, so a cancel or a timeout can no longer void it
-- (settle-sale voids only an open sale); a sale already void or settled is refused before
-- anything is charged. If the sale's run ended anyway before it heard of the payment (it
-- was cancelled from the console: `signal` answers false), the charge is refunded.
local sales = database "sales" { migrations = "migrations/sales" }
local settle = workflows "settle-sale"
local Payments = objects "Payments"
local Registrar = objects "Registrar"

workflow "pay-sale" (function(wf, payment)
    -- Read back, as in sale.lua's void: a hold run again after its update finds the sale
    -- held (only this run, "pay-<sale id>", moves the sale to paying).
    local held = wf:step("hold", { retries = 3 }, function()
        sales:exec("UPDATE sales SET state = 'paying' WHERE id = ? AND state = 'open'", { payment.id })
        local row = sales:first("SELECT state FROM sales WHERE id = ?", { payment.id })
        return row ~= nil and row.state == "paying"
    end)
    if not held then
        return { outcome = "refused", reason = "sale " .. payment.id .. " is not open (void, settled or unknown)" }
    end

    local receipt = wf:step("charge", { retries = 3, backoff = "1s" }, function()
        return Payments("desk"):charge(payment.price, wf.step_id)
    end)

    local signature = wf:step("sign", function()
        return Registrar("desk"):sign({ sale = payment.id, receipt = receipt.id })
    end)

    local delivered = wf:step("tell-sale", function()
        return settle:get("sale-" .. payment.id):signal("paid", { by = payment.user, receipt = receipt.id })
    end)

    if not delivered then
        wf:step("refund", { retries = 3 }, function()
            Payments("desk"):refund(receipt.key)
            sales:exec("UPDATE sales SET state = 'void' WHERE id = ?", { payment.id })
        end)
        return { outcome = "refunded", receipt = receipt.id }
    end

    return { outcome = "paid", receipt = receipt.id, signature = signature }
end)

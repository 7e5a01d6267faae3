local sales = database "sales" { migrations = "migrations/sales" }
local Account = objects "Account"

local settle = workflow "settle-sale" (function(wf, sale)
    wf:step("notify", { retries = 3 }, function()
        Account(sale.winner):notify("pay-up", { price = sale.price })
    end)

    local paid, which = wf:race({ "paid", "cancelled" }, { timeout = "72h" })

    if which ~= "paid" then
        wf:step("void", { retries = 3 }, function()
            sales:exec("UPDATE sales SET state = 'void' WHERE id = ?", { sale.id })
        end)
        return { outcome = "void" }
    end

    wf:step("settle", { retries = 3 }, function()
        sales:exec("UPDATE sales SET state = 'settled' WHERE id = ?", { sale.id })
    end)

    return { outcome = "settled" }
end)

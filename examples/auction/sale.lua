local sales = database "sales" { migrations = "migrations/sales" }
local Account = objects "Account"

local settle = workflow "settle-sale" (function(wf, sale)
    -- The sale's row, written here too so a sale started any way (the API, `lunaflow start`,
    -- another workflow) is one the routes know; the API writes it before it answers.
    wf:step("record", function()
        sales:exec("INSERT INTO sales (id, winner, price, state) VALUES (?, ?, ?, 'open') ON CONFLICT (id) DO NOTHING",
            { sale.id, sale.winner, sale.price })
    end)

    wf:step("notify", { retries = 3 }, function()
        Account(sale.winner):notify("pay-up", { price = sale.price })
    end)

    local paid, which = wf:race({ "paid", "cancelled" }, { timeout = "72h" })

    if which ~= "paid" then
        -- Void only a sale nobody is paying: a payment that held the sale first (pay.lua)
        -- wins, and its "paid" signal is on its way.
        -- The state is read back, not the update's count: an attempt run again after its
        -- update landed (a crash before the result was recorded) finds its own void.
        local voided = wf:step("void", { retries = 3 }, function()
            sales:exec("UPDATE sales SET state = 'void' WHERE id = ? AND state = 'open'", { sale.id })
            return sales:first("SELECT state FROM sales WHERE id = ?", { sale.id }).state == "void"
        end)
        if voided then
            return { outcome = "void" }
        end
        wf:await("paid")
    end

    wf:step("settle", { retries = 3 }, function()
        sales:exec("UPDATE sales SET state = 'settled' WHERE id = ?", { sale.id })
    end)

    -- Published, so `lunaflow runs --where state=settled` (or a route's run:value("state"))
    -- finds settled sales without replaying them. Behind wf:version: runs recorded before the
    -- change (the goldens under tests/golden) finish on the old path.
    if wf:version("publish-state") then
        wf:set("state", "settled")
    end

    return { outcome = "settled" }
end)

-- examples/auction/sale.lua for bench/aws_cost.py: the "sales" database is a kv namespace
-- here (the RDS Data API is not under moto); the workflow is otherwise the same.
local sales = kv "sales"
local Account = objects "Account"

local function set_state(id, state)
    local sale = sales:get(id)
    sale.state = state
    sales:put(id, sale)
end

local settle = workflow "settle-sale" (function(wf, sale)
    wf:step("notify", { retries = 3 }, function()
        Account(sale.winner):notify("pay-up", { price = sale.price })
    end)

    local paid, which = wf:race({ "paid", "cancelled" }, { timeout = "72h" })

    if which ~= "paid" then
        wf:step("void", { retries = 3 }, function()
            set_state(sale.id, "void")
        end)
        return { outcome = "void" }
    end

    wf:step("settle", { retries = 3 }, function()
        set_state(sale.id, "settled")
    end)

    return { outcome = "settled" }
end)

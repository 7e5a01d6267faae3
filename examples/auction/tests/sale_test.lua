-- The auction's own tests: `lunaflow test examples/auction`.

local function open_sale(p, id, price)
    local r = p:fetch("POST", "/api/sale", { body = json.encode({ id = id, winner = "ada", price = price or 25 }) })
    assert_eq(r.status_code, 201, "opening " .. id)
end

test("a paid sale settles", function(p)
    open_sale(p, "lot-1")
    assert_eq(p:get("sale-lot-1").status, "awaiting")
    local r = p:fetch("POST", "/api/sale/pay", { body = json.encode({ id = "lot-1", user = "ada" }) })
    assert_eq(r.status_code, 202)
    local run = p:get("sale-lot-1")
    assert_eq(run.status, "completed")
    assert_eq(run.result, { outcome = "settled" })
    local sale = json.parse(p:fetch("GET", "/api/sale/lot-1").body).sale
    assert_eq(sale.state, "settled")
end)

test("a cancelled sale is void", function(p)
    open_sale(p, "lot-2")
    p:fetch("POST", "/api/sale/cancel", { body = json.encode({ id = "lot-2" }) })
    assert_eq(p:get("sale-lot-2").result, { outcome = "void" })
end)

test("a sale nobody pays is void after 72 hours", function(p)
    open_sale(p, "lot-3")
    p:advance("71h59m")
    assert_eq(p:get("sale-lot-3").status, "awaiting", "still waiting a minute before the timeout")
    p:advance("1m")
    assert_eq(p:get("sale-lot-3").result, { outcome = "void" })
end)

test("a double-clicked pay charges once", function(p)
    open_sale(p, "lot-4", 40)
    local body = json.encode({ id = "lot-4", user = "ada" })
    p:fetch("POST", "/api/sale/pay", { body = body })
    p:fetch("POST", "/api/sale/pay", { body = body })
    local ledger = json.parse(p:fetch("GET", "/api/payments").body)
    local charges = 0
    for _, charge in pairs(ledger) do
        charges = charges + 1
        assert_eq(charge.amount, 40)
        assert_eq(charge.repeats, 0)
    end
    assert_eq(charges, 1)
end)

test("the winner is told to pay (a stubbed object)", function(p)
    local told = {}
    p:stub_object("Account", "notify", function(key, kind, fields)
        told[#told + 1] = key .. ":" .. kind .. ":" .. fields.price
    end)
    open_sale(p, "lot-5", 7)
    assert_eq(told, { "ada:pay-up:7" })
end)

test("a sale whose run was cancelled cannot be paid, and nothing is charged", function(p)
    open_sale(p, "lot-6")
    p:cancel("sale-lot-6") -- as the console does: the run ends, the row stays open
    local r = p:fetch("POST", "/api/sale/pay", { body = json.encode({ id = "lot-6", user = "ada" }) })
    assert_eq(r.status_code, 409)
    assert_eq(json.parse(p:fetch("GET", "/api/payments").body), {})
end)

test("a payment that reached a cancelled sale's run too late is refunded", function(p)
    open_sale(p, "lot-7", 30)
    p:cancel("sale-lot-7")
    -- Started directly (the route refuses this sale): pay-sale holds the open row, charges,
    -- then learns from `signal` that the sale's run has ended, and refunds.
    local run = p:start("pay-sale", { id = "lot-7", user = "ada", price = 30 }, { id = "pay-lot-7" })
    assert_eq(p:get("pay-lot-7").result.outcome, "refunded")
    local charge = json.parse(p:fetch("GET", "/api/payments").body)["pay-lot-7/charge/1/1"]
    assert_eq(charge.refunded, true)
    assert_eq(json.parse(p:fetch("GET", "/api/sale/lot-7").body).sale.state, "void")
end)

test("a cancel that arrives while a payment holds the sale loses to the payment", function(p)
    local calls = 0
    p:stub_object("Payments", "charge", function(key, amount, step_id)
        calls = calls + 1
        if calls == 1 then error("card processor busy", 0) end -- the payment waits out a backoff
        return { id = "rcpt-stub", amount = amount, key = step_id, repeats = 0 }
    end)
    open_sale(p, "lot-8", 12)
    p:fetch("POST", "/api/sale/pay", { body = json.encode({ id = "lot-8", user = "ada" }) })
    assert_eq(p:get("pay-lot-8").status, "sleeping", "the charge's retry is due in 1s")
    local r = p:fetch("POST", "/api/sale/cancel", { body = json.encode({ id = "lot-8" }) })
    assert_eq(r.status_code, 202)
    assert_eq(p:get("sale-lot-8").status, "awaiting", "held by the payment: not voided")
    p:advance("1s")
    assert_eq(p:get("pay-lot-8").result.outcome, "paid")
    assert_eq(p:get("sale-lot-8").result, { outcome = "settled" })
    assert_eq(json.parse(p:fetch("GET", "/api/sale/lot-8").body).sale.state, "settled")
end)

test("the nightly report counts the sales nobody has paid", function(p)
    open_sale(p, "lot-30", 10)
    open_sale(p, "lot-31", 15)
    open_sale(p, "lot-32", 20)
    p:fetch("POST", "/api/sale/pay", { body = json.encode({ id = "lot-32", user = "ada" }) })
    -- 03:00 in Paris in January is 02:00 UTC; the clock starts at 2026-01-01T00:00Z.
    p:advance("2h")
    local night = p:get("unpaid-report@2026-01-01T02:00:00Z")
    assert_eq(night.result, { sales = 2, total = 25 })
    assert_eq(p:runs({ workflow = "unpaid-report" })[1].id, night.id, "one run a night")
end)

-- The seed's "Signals" fetch handler, word for word, plus a route that starts the sale
-- with the seed's start call: a retried start joins the run instead of making a second.
local settle = workflows "settle-sale"

on "fetch" (function(request)
    if request.method == "POST" and request.path == "/api/sale/start" then
        local run = settle:start({ id = "lot-42", winner = "ada", price = 25 },
            { id = "sale-lot-42" })
        return { status_code = 200, body = run.id }
    end
    if request.method == "POST" and request.path == "/api/sale/pay" then
        local body = json.parse(request.body)
        settle:get("sale-" .. body.id):signal("paid", { by = body.user })
        return { status_code = 200, body = "" }
    end
    return { status_code = 404, body = "" }
end)

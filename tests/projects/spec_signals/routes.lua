-- The seed's fetch route, verbatim.
local settle = workflows "settle-sale"

on "fetch" (function(request)
    if request.method == "POST" and request.path == "/api/sale/pay" then
        local body = json.parse(request.body)
        settle:get("sale-" .. body.id):signal("paid", { by = body.user })
        return { status_code = 200, body = "" }
    end
    return { status_code = 404, body = "" }
end)

-- examples/auction/api.lua for bench/aws_cost.py, with the "sales" database as a kv namespace.
local sales = kv "sales"
local settle = workflows "settle-sale"
local pay = workflows "pay-sale"
local Payments = objects "Payments"

local function reply(status, value)
    return {
        status_code = status,
        headers = { ["content-type"] = "application/json" },
        body = json.encode(value),
    }
end

local function body_of(request)
    local ok, body = pcall(json.parse, request.body)
    if not ok or type(body) ~= "table" then return nil end
    return body
end

local function valid_id(id)
    return type(id) == "string" and id:match("^[%w%-_]+$") ~= nil and #id <= 64
end

local function open_sale(request)
    local body = body_of(request)
    if not body or not valid_id(body.id) or type(body.winner) ~= "string"
        or math.type(body.price) ~= "integer" or body.price <= 0 then
        return reply(400, { error = "send { id = \"lot-42\", winner = \"ada\", price = 25 } with a positive whole price" })
    end
    if not sales:get(body.id) then
        sales:put(body.id, { id = body.id, winner = body.winner, price = body.price, state = "open" })
    end
    local run = settle:start({ id = body.id, winner = body.winner, price = body.price },
        { id = "sale-" .. body.id })
    return reply(201, { sale = body.id, run = run.id })
end

on "fetch" (function(request)
    if request.method == "POST" and request.path == "/api/sale" then
        return open_sale(request)
    end

    if request.method == "POST" and request.path == "/api/sale/pay" then
        local body = body_of(request)
        if not body or not valid_id(body.id) or type(body.user) ~= "string" then
            return reply(400, { error = "send { id = \"lot-42\", user = \"ada\" }" })
        end
        local sale = sales:get(body.id)
        if not sale then return reply(404, { error = "no sale " .. body.id }) end
        if sale.state == "void" then
            return reply(409, { error = "sale " .. body.id .. " is void; it can no longer be paid" })
        end
        local run = pay:start({ id = body.id, user = body.user, price = sale.price }, { id = "pay-" .. body.id })
        return reply(202, { sale = body.id, run = run.id })
    end

    local id = request.path:match("^/api/sale/([^/]+)$")
    if request.method == "GET" and id then
        local sale = sales:get(id)
        if not sale then return reply(404, { error = "no sale " .. id }) end
        local run = settle:get("sale-" .. id)
        return reply(200, { sale = sale, run = { id = run.id, status = run:status(), result = run:result() } })
    end

    if request.method == "GET" and request.path == "/api/payments" then
        return reply(200, Payments("desk"):ledger())
    end

    return reply(404, { error = "no route " .. request.method .. " " .. request.path })
end)

-- The auction's HTTP routes.
local sales = database "sales" { migrations = "migrations/sales" }
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
    sales:exec("INSERT INTO sales (id, winner, price, state) VALUES (?, ?, ?, 'open') ON CONFLICT (id) DO NOTHING",
        { body.id, body.winner, body.price })
    local run = settle:start({ id = body.id, winner = body.winner, price = body.price },
        { id = "sale-" .. body.id })
    return reply(201, { sale = body.id, run = run.id })
end

local function sale_of(id)
    return sales:first("SELECT id, winner, price, state FROM sales WHERE id = ?", { id })
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
        local sale = sale_of(body.id)
        if not sale then return reply(404, { error = "no sale " .. body.id }) end
        -- A second click joins the payment already made (same run id, charged once).
        local paying = pcall(function() return pay:get("pay-" .. body.id):status() end)
        if not paying then
            if sale.state ~= "open" then
                return reply(409, { error = "sale " .. body.id .. " is " .. sale.state .. "; it can no longer be paid" })
            end
            local status = settle:get("sale-" .. body.id):status()
            if status == "completed" or status == "cancelled" then
                return reply(409, { error = "sale " .. body.id .. "'s run is " .. status .. "; it can no longer be paid" })
            end
        end
        local run = pay:start({ id = body.id, user = body.user, price = sale.price }, { id = "pay-" .. body.id })
        return reply(202, { sale = body.id, run = run.id })
    end

    if request.method == "POST" and request.path == "/api/sale/cancel" then
        local body = body_of(request)
        if not body or not valid_id(body.id) then return reply(400, { error = "send { id = \"lot-42\" }" }) end
        if not sale_of(body.id) then return reply(404, { error = "no sale " .. body.id }) end
        local live = settle:get("sale-" .. body.id):signal("cancelled", { by = body.user })
        return reply(live and 202 or 409, { sale = body.id, delivered = live })
    end

    local id = request.path:match("^/api/sale/([^/]+)$")
    if request.method == "GET" and id then
        if not sale_of(id) then return reply(404, { error = "no sale " .. id }) end
        -- The run first, then the row: a run that has ended has already written its row.
        local run = settle:get("sale-" .. id)
        local status, result = run:status(), run:result()
        return reply(200, { sale = sale_of(id), run = { id = run.id, status = status, result = result } })
    end

    if request.method == "GET" and request.path == "/api/payments" then
        return reply(200, Payments("desk"):ledger())
    end

    return reply(404, { error = "no route " .. request.method .. " " .. request.path })
end)

-- User-queue handler tests on AWS (tests/aws/test_handlers_queue.py).
local orders = queue "orders"

on "queue" ("orders", function(message)
    log.info("order", { id = message.id, body = message.body, attempts = message.attempts })
    if message.body.bad then
        error("order " .. tostring(message.body.order) .. " is bad", 0)
    end
    if message.body.until_attempt and message.attempts < message.body.until_attempt then
        error("not yet (attempt " .. message.attempts .. ")", 0)
    end
end)

-- POST /send { ... }: the body goes to the orders queue from a fetch handler.
on "fetch" (function(request)
    if request.method == "POST" and request.path == "/send" then
        local id = orders:send(json.parse(request.body))
        return { status_code = 202, body = json.encode({ sent = id }) }
    end
    return { status_code = 404, body = "" }
end)

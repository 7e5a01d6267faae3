-- Infrastructure tests (tests/infra/test_stack.py): a project with a user queue, a queue it
-- only sends to, and a secret, so the stack must give them DLQs, an event source and a scoped grant.
local audit = queue "audit"

on "queue" ("emails", function(message)
    log.info("email", { to = message.body.to })
    audit:send({ sent = message.body.to })
end)

local notify = workflow "notify" (function(wf, input)
    wf:step("send", function()
        local key = secret "api-key"
        log.info("sending", { to = input.to, keyed = key ~= nil })
    end)
    return { ok = true }
end)

on "fetch" (function(request)
    if request.method == "POST" and request.path == "/notify" then
        local body = json.parse(request.body)
        notify:start({ to = body.to }, { id = "notify-" .. body.to })
        return { status_code = 202, body = "" }
    end
    return { status_code = 404, body = "" }
end)

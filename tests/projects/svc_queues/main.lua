-- Queue service tests (tests/services/test_queues.py).
local queues = {
    inbox = queue "inbox",
    failing = queue "failing",
    flaky = queue "flaky",
    handoff = queue "handoff",
    unhandled = queue "unhandled",
}

local function seen(name, message)
    log.info(name, { id = message.id, body = message.body, attempts = message.attempts, at = os.time() })
end

on "queue" ("inbox", function(message) seen("inbox", message) end)

-- Always fails: default settings (3 attempts, 30s apart).
on "queue" ("failing", function(message)
    seen("failing", message)
    error("handler refused " .. tostring(message.body.n), 0)
end)

-- Fails until its fourth attempt; lunaflow.toml gives it 5 attempts, 10s apart.
on "queue" ("flaky", function(message)
    seen("flaky", message)
    if message.attempts < (message.body.succeed_on or 99) then error("not yet", 0) end
end)

-- Seed: "A queue handler can start a workflow when a message turns out to need one."
on "queue" ("handoff", function(message)
    seen("handoff", message)
    workflows "needs-care":start(message.body, { id = "care-" .. message.body.id })
end)

-- POST { queue, body, opts }: send from a handler.
on "fetch" (function(request)
    local q = json.parse(request.body)
    local target = queues[q.queue]
    local ok, r = pcall(function() return target:send(q.body, q.opts) end)
    return { status_code = 200, body = json.encode({ ok = ok, value = ok and r or nil, error = not ok and r or nil }) }
end)

workflow "needs-care" (function(wf, input)
    return { cared = input.id }
end)

-- Sends from a step.
workflow "sender" (function(wf, input)
    wf:step("send", function() queues.inbox:send(input.body, input.opts) end)
    return "sent"
end)

-- Sends from the workflow function itself: refused.
workflow "sender-outside" (function(wf, input)
    local ok, e = pcall(function() return queues.inbox:send(input.body) end)
    return { ok = ok, error = e }
end)

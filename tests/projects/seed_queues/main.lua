-- Queues for tests/semantics/test_queues.py: every queue setting of lunaflow.toml, run on
-- both harnesses. Each handler logs what it saw and when; `succeed_on` in a body says which
-- attempt succeeds (none by default).
local queues = {}
for _, name in ipairs({ "defaults", "tuned", "once", "patient", "stubborn", "handoff", "plain" }) do
    queues[name] = queue(name)
end

local function handle(name)
    on "queue" (name, function(message)
        log.info("delivered", { queue = name, n = message.body.n, attempts = message.attempts, at = os.time() })
        if message.attempts < (message.body.succeed_on or math.huge) then
            error(name .. " refused " .. tostring(message.body.n), 0)
        end
    end)
end

for _, name in ipairs({ "defaults", "tuned", "once", "patient", "stubborn" }) do handle(name) end

on "queue" ("plain", function(message)
    log.info("delivered", { queue = "plain", n = message.body.n, attempts = message.attempts, at = os.time() })
end)

-- The seed: "A queue handler can start a workflow when a message turns out to need one."
on "queue" ("handoff", function(message)
    workflows "needs-care":start(message.body, { id = "care-" .. message.body.n })
end)

workflow "needs-care" (function(wf, input)
    return { cared = input.n }
end)

-- POST { queue, body, delay }: send from a handler.
on "fetch" (function(request)
    local q = json.parse(request.body)
    local id = queues[q.queue]:send(q.body, q.delay and { delay = q.delay } or nil)
    return { status_code = 200, body = id }
end)

-- Sends from a step.
workflow "sender" (function(wf, input)
    wf:step("send", function() queues[input.queue]:send(input.body, input.delay and { delay = input.delay } or nil) end)
    return "sent"
end)

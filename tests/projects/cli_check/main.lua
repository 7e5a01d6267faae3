-- The project of tests/cli/test_check.py: in-flight runs of every kind for `lunaflow check`
-- to replay. The tests copy this folder unchanged, or with step 'reserve' renamed to 'hold'
-- (a text replacement of the one step call that names it), or with a sleep added before
-- the await, or without the napper. Every step body leaves traces check must never produce: a log line
-- ("body ran"), a kv entry and a database row.
local orders = database "orders" { migrations = "migrations/orders" }
local seen = kv "seen"

-- The attempt number of the running step, read off wf.step_id (<run>/<step>/<pass>/<attempt>).
local function attempt_of(wf)
    return tonumber(string.match(wf.step_id, "(%d+)$"))
end

local function trace(wf, step)
    log.info("body ran", { run = wf.id, step = step, step_id = wf.step_id })
    seen:put(wf.step_id, step)
end

-- "reserve" fails its first `fail_times` attempts (backoff 1h), then the run awaits "paid".
workflow "order" (function(wf, input)
    local fail_times = (input and input.fail_times) or 0
    local attempt = wf:step("reserve", { retries = 3, backoff = "1h" }, function()
        trace(wf, "reserve")
        local n = attempt_of(wf)
        if n <= fail_times then error("out of stock on attempt " .. n, 0) end
        orders:exec(
            "INSERT INTO orders (id, state) VALUES (?, 'reserved') "
                .. "ON CONFLICT (id) DO UPDATE SET state = 'reserved'",
            { wf.id }
        )
        return n
    end)
    local paid = wf:await("paid", { timeout = "72h" })
    wf:step("ship", function()
        trace(wf, "ship")
        orders:exec("UPDATE orders SET state = 'shipped' WHERE id = ?", { wf.id })
    end)
    return { reserved_on = attempt, paid = paid }
end)

-- Sleeps a day, then writes. No step named 'reserve': a rename of it leaves this alone.
workflow "napper" (function(wf)
    wf:sleep("24h")
    wf:step("wake", function() trace(wf, "wake") end)
    return "rested"
end)

-- Resolves a secret in the workflow function itself, so replay resolves it again.
workflow "secretive" (function(wf)
    local key = secret "api-key"
    wf:await("go")
    wf:step("use", function() trace(wf, "use") end)
    return key
end)

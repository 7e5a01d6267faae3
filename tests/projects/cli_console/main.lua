-- Workflows for tests/cli/test_console.py and tests/cli/test_cli_process.py: runs the CLI
-- console (SPEC section 4) lists, shows, resumes, cancels, signals and starts. No stand-ins:
-- the CLI opens the data folder with the real local services, so every body here is
-- plain Lua. A step body logs what it does (log.info), so a test can see it ran.

-- The attempt number of the running step, read off wf.step_id (<run>/<step>/<pass>/<attempt>).
local function attempt_of(wf)
    return tonumber(string.match(wf.step_id, "(%d+)$"))
end

-- "reserve" fails its first `fail_times` attempts, then succeeds; then the run races
-- "paid" against "cancelled" for 72h, ships, and returns.
workflow "order" (function(wf, input)
    input = input or {}
    local fail_times = input.fail_times or 0
    local reserved = wf:step("reserve", { retries = 3, backoff = "5s" }, function()
        local n = attempt_of(wf)
        log.info("body reserve", { run = wf.id, attempt = n })
        if n <= fail_times then error("card declined on attempt " .. n, 0) end
        return { attempt = n }
    end)
    local payload, which = wf:race({ "paid", "cancelled" }, { timeout = "72h" })
    if which ~= "paid" then
        return { outcome = which or "timed out" }
    end
    wf:step("ship", function()
        log.info("body ship", { run = wf.id })
        return "shipped"
    end)
    return { outcome = "settled", by = payload and payload.by, reserved_on = reserved.attempt }
end)

-- Sleeps an hour, then returns.
workflow "napper" (function(wf)
    wf:sleep("1h")
    return "rested"
end)

-- Spawns a child from a step (so the child records its parent), then awaits "done".
workflow "parent" (function(wf, input)
    wf:step("spawn", function()
        workflows "child":start({ from = wf.id }, { id = wf.id .. "-child" })
        return wf.id .. "-child"
    end)
    wf:await("done")
    return "parent done"
end)

-- Spawns a "parent", which spawns its own child: three generations.
workflow "grandparent" (function(wf, input)
    wf:step("spawn", function()
        workflows "parent":start(nil, { id = wf.id .. "-parent" })
        return wf.id .. "-parent"
    end)
    wf:await("done")
    return "grandparent done"
end)

workflow "child" (function(wf, input)
    wf:await("go")
    return "child done"
end)

-- Reads a secret before and after a wait: a run is pinned to the version it first resolved.
workflow "secretive" (function(wf)
    local first = wf:step("first", function() return secret "api-key" end)
    wf:await("go")
    local second = wf:step("second", function() return secret "api-key" end)
    return { first = first, second = second }
end)

-- The runtime's own limits under the torture: a step that runs its Lua state out of
-- memory, steps that time out in host calls (HTTP through an object, a database query),
-- and a step whose first attempt ends its process every time it runs. Each fails in its
-- first attempt only, so every run's result is known in advance; how it failed is in the
-- journal (the checker counts timeouts, interruptions and memory refusals).
local effect = require "lib.effect"
local slow_db = database "slow" {}

object "Hog" {
    -- The first attempt fills the Lua state until an allocation fails; later ones eat little.
    eat = function(self, attempt, k)
        if attempt == 1 then
            local t, chunk = {}, string.rep("x", 64 * 1024)
            while true do t[#t + 1] = chunk .. #t end
        end
        return k
    end,
}

object "Slow" {
    get = function(self, url) return http.get(url, { timeout = "20s" }).status end,
}

workflow "hungry" (function(wf, input)
    local eaten = wf:step("hog", { retries = 3, backoff = "50ms" }, function()
        local attempt = effect(wf, input)
        return objects("Hog")(wf.id):eat(attempt, input.k)
    end)
    return { eaten = eaten }
end)

workflow "slowcalls" (function(wf, input)
    local status = wf:step("call", { timeout = "300ms", retries = 3, backoff = "50ms" }, function()
        local attempt = effect(wf, input)
        return objects("Slow")(wf.id):get(input.slow .. "/slow?ms=" .. (attempt == 1 and 3000 or 0))
    end)
    local n = wf:step("query", { timeout = "200ms", retries = 3, backoff = "50ms" }, function()
        local attempt = effect(wf, input)
        local upto = attempt == 1 and 200000000 or input.k
        return slow_db:first("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) "
            .. "SELECT count(*) AS n FROM c", { upto }).n
    end)
    return { status = status, n = n }
end)

workflow "doomed" (function(wf, input)
    local survived = wf:step("boom", { retries = 3, backoff = "50ms" }, function()
        if wf.step_id:sub(-2) == "/1" then
            -- A second's wait before the kill: the runs a kill interrupted restart together
            -- with this one, and their bodies end before the next kill, which would otherwise
            -- cut them each time.
            objects("Slow")(wf.id):get(input.slow .. "/slow?ms=1000")
        end
        -- Attempt 1 never returns: it asks to be killed, every time it starts.
        return effect(wf, input, 1) >= 2
    end)
    return { survived = survived, k = input.k }
end)

-- Steps: a loop of steps, a flaky step with retries and backoff, sleeps, a loop of
-- sleeps and steps.
local effect = require "lib.effect"

workflow "chain" (function(wf, input)
    local total = 0
    for i = 1, input.n do
        total = total + wf:step("add", function()
            effect(wf, input)
            return i * input.k
        end)
    end
    -- Fails while its attempt is at most input.fails (0..2): each failure is recorded and
    -- the next attempt has a new step id.
    local flaky = wf:step("flaky", { retries = 3, backoff = "100ms" }, function()
        local attempt = effect(wf, input)
        if attempt <= input.fails then
            error("flaky attempt " .. attempt, 0)
        end
        return attempt
    end)
    wf:sleep(input.nap)
    local ticks = 0
    for _ = 1, 2 do
        wf:sleep("50ms")
        ticks = ticks + wf:step("tick", function()
            effect(wf, input)
            return 1
        end)
    end
    local last = wf:step("last", function()
        effect(wf, input)
        return total + flaky + ticks
    end)
    return { total = total, flaky = flaky, ticks = ticks, last = last }
end)

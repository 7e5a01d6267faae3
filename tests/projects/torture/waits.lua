-- Waits: await, race then await of the loser, all, and an await that times out. The
-- driver sends each signal once or twice, before or after the run reaches its wait.
local effect = require "lib.effect"

workflow "waits" (function(wf, input)
    local base = wf:step("prepare", function()
        effect(wf, input)
        return input.k
    end)
    local go = wf:await("go", { timeout = "1h" })
    -- A timeout that fits a request's budget (on AWS, -c eagerMs=10000): the signal's
    -- request runs this step itself (bench/torture_aws.py's fetch containers).
    wf:step("after-go", { timeout = "8s" }, function()
        effect(wf, input)
    end)
    local first, winner = wf:race({ "left", "right" }, { timeout = "1h" })
    local second = wf:await(winner == "left" and "right" or "left", { timeout = "1h" })
    local x, y = wf:all({ "x", "y" }, { timeout = "1h" })
    local never = wf:await("never", { timeout = "200ms" })
    local sum = wf:step("finish", function()
        effect(wf, input)
        return base + go.v + first.v + second.v + x.v + y.v
    end)
    return {
        go = go.v,
        winner = winner,
        first = first.v,
        second = second.v,
        x = x.v,
        y = y.v,
        timed_out = never == nil,
        sum = sum,
    }
end)

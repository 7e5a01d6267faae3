-- Workflows whose handles the tests drive (SPEC 3 "Handles").
local Gate = objects "Gate"

local settle = workflow "settle-sale" (function(wf, sale)
    local paid = wf:await("paid", { timeout = "72h" })
    if paid == nil then return { outcome = "void" } end
    return { outcome = "settled", by = paid.by }
end)

workflow "other" (function(wf, input)
    wf:await("never")
end)

-- A tree of runs: each level starts the next from inside a step, then waits.
workflow "tree" (function(wf, input)
    local child = nil
    if input.depth > 0 then
        child = wf:step("spawn", function()
            return workflows "tree":start({ depth = input.depth - 1 }, { id = wf.id .. "-c" }).id
        end)
    end
    wf:await("done")
    return { child = child }
end)

-- Starts a run and cancels it inside the same step, while it is still "running".
workflow "spawn-and-cancel" (function(wf, input)
    return wf:step("spawn", function()
        local run = workflows "settle-sale":start({}, { id = input.child })
        local before = run:status()
        run:cancel()
        return { before = before, after = run:status() }
    end)
end)

-- Uses a handle of a run that may not exist, from inside a step.
workflow "probe" (function(wf, input)
    return wf:step("probe", function()
        local run = settle:get(input.target)
        local out = { id = run.id }
        for _, method in ipairs({ "status", "result", "signal", "cancel", "resume" }) do
            local ok, err = pcall(function()
                local r
                if method == "signal" then r = run:signal("paid", { by = "x" }) else r = run[method](run) end
                return r
            end)
            out[method] = ok and "ok" or err
        end
        return out
    end)
end)

-- Fails at its gate until the Gate stand-in lets it through.
workflow "gated" (function(wf, input)
    wf:step("gate", function()
        local open = Gate("g"):check()
        if not open then error("gate closed") end
    end)
    return "through"
end)

workflow "napper" (function(wf, input)
    wf:sleep("1h")
    return "rested"
end)

workflow "quick" (function(wf, input)
    return { echo = input }
end)

-- Calls one handle method on a missing run straight from a step body, uncaught.
workflow "direct" (function(wf, input)
    wf:step("call", function()
        local run = settle:get("sale-9")
        local r
        if input.method == "signal" then r = run:signal("paid", {}) else r = run[input.method](run) end
        return r
    end)
end)

-- Fails at its gate, then waits for "paid": signals sent while failed are kept.
workflow "gated-then-await" (function(wf, input)
    wf:step("gate", function()
        if not Gate("g"):check() then error("gate closed") end
    end)
    return wf:await("paid", { timeout = "1h" })
end)

-- Workflows for tests/seed/test_gotchas.py: the seed's "Gotchas".
-- `Effect(wf.id):did(label)` is an object stand-in recording each effect.
local Effect = objects "Effect"

workflow "three" (function(wf)
    wf:step("flaky", { retries = 3 }, function()
        Effect(wf.id):did("flaky")
        error("still broken", 0)
    end)
    return "unreachable"
end)

-- A wf:step inside a step body.
workflow "nest" (function(wf)
    wf:step("outer", function()
        Effect(wf.id):did("outer")
        wf:step("inner", function() Effect(wf.id):did("inner") end)
        Effect(wf.id):did("after-inner")
    end)
    return "unreachable"
end)

-- The same, with the body catching the error to show its exact text.
workflow "nest-caught" (function(wf)
    return wf:step("outer", function()
        local ok, err = pcall(function()
            return wf:step("inner", function() Effect(wf.id):did("inner") end)
        end)
        return { ok = ok, err = err }
    end)
end)

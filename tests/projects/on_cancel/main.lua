-- Workflows for tests/semantics/test_on_cancel.py: cleanup on cancel (wf:on_cancel) and the
-- overall bound of a wait (wf:all's within). `Ledger(wf.id):note(what)` is an object
-- stand-in recording each call; `:release(hold)` answers ok = false while the test makes it fail.
local Ledger = objects "Ledger"

-- A reservation released when the order is cancelled; the handler's step is retried.
local order = workflow "order" (function(wf, o)
    local hold = wf:step("reserve", function() return Ledger(wf.id):note("reserve") end)
    wf:on_cancel({ timeout = o.budget }, function()
        wf:step("release", { retries = o.retries or 3, backoff = "10s" }, function()
            local r = Ledger(wf.id):release(hold)
            if not r.ok then error("the ledger is down", 0) end
            return r.note
        end)
        if o.wait then wf:sleep(o.wait) end
        wf:step("notify", function() return Ledger(wf.id):note("notify") end)
    end)
    if o.child then
        wf:step("start-child", function()
            return workflows("order"):start({ child = false }, { id = wf.id .. "-child" }).id
        end)
    end
    wf:await("paid")
    return wf:step("ship", function() return Ledger(wf.id):note("ship") end)
end)

-- No handler: a cancel ends it as it always did.
workflow "plain" (function(wf)
    wf:step("reserve", function() return Ledger(wf.id):note("reserve") end)
    wf:await("paid")
end)

-- A handler that raises: the run ends cancelled all the same, with the error.
workflow "bad-cleanup" (function(wf)
    wf:on_cancel(function() error("no refunds today", 0) end)
    wf:await("paid")
end)

-- A handler whose steps never end: the step budget cuts it short.
workflow "endless-cleanup" (function(wf)
    wf:on_cancel(function()
        local i = 0
        while true do
            i = i + 1
            wf:step("undo", function() return i end)
        end
    end)
    wf:await("paid")
end)

-- Bad input: the registration refused before anything is journaled.
workflow "twice" (function(wf)
    wf:on_cancel(function() end)
    wf:on_cancel(function() end)
end)

workflow "not-a-function" (function(wf)
    wf:on_cancel("release")
end)

workflow "in-a-step" (function(wf)
    wf:step("s", function() wf:on_cancel(function() end) end)
end)

workflow "bad-option" (function(wf)
    wf:on_cancel({ timout = "1m" }, function() end)
end)

workflow "bad-budget" (function(wf)
    wf:on_cancel({ timeout = "soon" }, function() end)
end)

-- wf:all bounded as a whole: each entry waits at most `timeout`, all of them `within`.
workflow "gather" (function(wf, o)
    local a, b, c = wf:all({ "a", "b", "c" }, { timeout = o.timeout, within = o.within })
    return { a = a, b = b, c = c }
end)

-- A run that fails with a handler registered: a cancel ends it as it stands.
workflow "fails" (function(wf)
    wf:on_cancel(function() wf:step("release", function() return 1 end) end)
    wf:step("charge", function() error("down", 0) end)
end)

-- A parent waiting on a child's result (wf:child, c:result()) when it is cancelled: its
-- handler runs, then the cascade cancels the child.
workflow "waits-on-child" (function(wf)
    wf:on_cancel(function() wf:step("release", function() return "released" end) end)
    local c = wf:child("plain", nil, { id = wf.id .. "-kid" })
    return c:result()
end)

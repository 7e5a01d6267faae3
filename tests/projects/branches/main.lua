-- Branches that run at once (wf:map, wf:all_of) for tests/semantics/test_branches.py.
local Desk = objects "Desk"

-- One branch: waits for "go" when asked (so a test chooses the order branches end in), fails
-- when told, and records an effect through an object with its step id.
workflow "item" (function(wf, input)
    if input.wait then
        local how = wf:await("go")
        if how == "fail" then error("item " .. input.n .. " was told to fail", 0) end
    end
    if input.fail then error("item " .. input.n .. " failed", 0) end
    return wf:step("work", function()
        return Desk("ledger"):record(input.n, wf.step_id) * 10
    end)
end)

workflow "fan" (function(wf, input)
    return wf:map(input.items, "item", { limit = input.limit })
end)

workflow "fan-named" (function(wf, input)
    return wf:map(input.items, workflows "item", {
        id = function(item, i) return wf.id .. "-" .. item.n end,
    })
end)

workflow "fan-caught" (function(wf, input)
    local ok, got = pcall(wf.map, wf, input.items, "item", { limit = input.limit })
    if ok then return { ok = got } end
    if type(got) ~= "table" or got.failed == nil then error(got, 0) end
    -- got.results is sparse (the failed positions are nil): keyed by text to return it.
    local results = {}
    for i = 1, #input.items do
        if got.results[i] ~= nil then results[tostring(i)] = got.results[i] end
    end
    return { failed = got.failed, results = results, text = tostring(got) }
end)

workflow "pair" (function(wf, input)
    local a = wf:child("item", { n = 1, wait = input.wait }, { id = wf.id .. "-a" })
    local b = wf:child("item", { n = 2, wait = input.wait, fail = input.fail }, { id = wf.id .. "-b" })
    local ok, got = pcall(wf.all_of, wf, { a = a, b = b })
    if ok then return got end
    if type(got) ~= "table" or got.failed == nil then error(got, 0) end
    return { failed = got.failed, results = got.results, text = tostring(got) }
end)

-- Bad calls, each refused before anything is journaled (the run fails with the message).
local function f() end
local bad = {
    not_array = function(wf) return wf:map("items", "item") end,
    keyed = function(wf) return wf:map({ a = { n = 1 } }, "item") end,
    hole = function(wf) return wf:map({ [1] = { n = 1 }, [3] = { n = 3 } }, "item") end,
    too_many = function(wf)
        local items = {}
        for i = 1, 1001 do items[i] = { n = i } end
        return wf:map(items, "item")
    end,
    limit = function(wf) return wf:map({ { n = 1 } }, "item", { limit = 0 }) end,
    option = function(wf) return wf:map({ { n = 1 } }, "item", { limt = 2 }) end,
    not_json = function(wf) return wf:map({ { n = 1 }, { n = 2, fn = f } }, "item") end,
    id_fn = function(wf) return wf:map({ { n = 1 } }, "item", { id = function() return 7 end }) end,
    undeclared = function(wf) return wf:map({ { n = 1 } }, "nope") end,
    not_handles = function(wf) return wf:all_of({ a = function() end }) end,
}
workflow "bad" (function(wf, input)
    return bad[input](wf)
end)

-- escape: table.insert(t, 1, v) on a table whose __len says 2^40: C shifts 2^40 slots
-- without a hook, in a step with a timeout that should stop it.
-- where: run
-- expect: contained
-- isolate: yes
local wf = ...
return wf:step("insert", { timeout = "1s" }, function()
    local t = setmetatable({}, { __len = function() return 2 ^ 40 // 1 end })
    table.insert(t, 1, "first")
    return "inserted"
end)

-- escape: table.remove(t, 1) on a table whose __len says 2^40: C shifts 2^40 slots.
-- where: run
-- expect: contained
-- isolate: yes
local wf = ...
return wf:step("remove", { timeout = "1s" }, function()
    local t = setmetatable({}, { __len = function() return 2 ^ 40 // 1 end })
    return table.remove(t, 1)
end)

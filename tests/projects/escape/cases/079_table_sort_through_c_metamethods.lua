-- escape: table.sort of 2^31-2 "elements" that C metamethods invent (__index = type
-- answers "table" for every slot, __newindex = type stores nothing): C's quicksort runs
-- billions of comparisons with no Lua instruction in between.
-- where: run
-- expect: contained
-- isolate: yes
local wf = ...
return wf:step("sort", { timeout = "1s" }, function()
    local t = setmetatable({}, { __len = function() return 2 ^ 31 // 1 - 2 end, __index = type, __newindex = type })
    table.sort(t)
    return "sorted"
end)

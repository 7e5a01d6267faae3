-- escape: table.unpack over a table whose __index chain is 1,990 tables deep, in a loop:
-- C's loop would follow the chain for every element, without the hook.
-- where: step
-- expect: error call stopped: it
-- isolate: yes
local t, top = {}, nil
top = t
for i = 1, 1990 do local n = {} setmetatable(t, { __index = n }) t = n end
local n = 0
for i = 1, 1e9 do n = n + select("#", table.unpack(top, 1, 100000)) end
return n

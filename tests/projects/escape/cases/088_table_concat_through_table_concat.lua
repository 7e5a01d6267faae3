-- escape: the same with table.concat itself as __index (a C function in plain Lua).
-- where: step
-- expect: error call stopped: it ran past its budget
-- isolate: yes
local t = setmetatable({}, { __index = table.concat })
return #table.concat(t, "", 1, math.maxinteger)

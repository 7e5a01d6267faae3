-- escape: exhaust the Lua state's memory from an object method, growing its own state.
-- where: object
-- expect: error ran out of memory (the Lua state's limit is 64 MiB)
local self = ...
self.state.hoard = {}
for i = 1, 1e9 do self.state.hoard[i] = string.rep("y", 1048576) .. i end

-- escape: exhaust the Lua state's memory from the fetch handler.
-- where: fetch
-- expect: error ran out of memory (the Lua state's limit is 64 MiB)
local t = {}
for i = 1, 1e9 do t[i] = string.rep("x", 1048576) .. i end

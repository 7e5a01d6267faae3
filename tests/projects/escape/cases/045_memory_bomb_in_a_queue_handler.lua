-- escape: exhaust the Lua state's memory from a queue handler.
-- where: queue
-- expect: error ran out of memory (the Lua state's limit is 64 MiB)
local t = {}
for i = 1, 1e9 do t[#t + 1] = string.rep("q", 1048576) .. i end

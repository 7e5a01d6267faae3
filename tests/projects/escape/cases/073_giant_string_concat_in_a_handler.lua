-- escape: build a string bigger than the Lua state's memory with table.concat.
-- where: object
-- expect: error ran out of memory (the Lua state's limit is 64 MiB)
local piece = string.rep("w", 1048576)
local parts = {}
for i = 1, 200 do parts[i] = piece end
return #table.concat(parts)

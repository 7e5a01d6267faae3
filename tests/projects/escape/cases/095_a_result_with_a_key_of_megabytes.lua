-- escape: return a table under a twenty-megabyte key: the encoder copied the key
-- into a path for every element below it, after the hook had been removed.
-- where: step
-- expect: error call stopped: it
-- isolate: yes
local k = string.rep("k", 20000000)
local inner = {}
for i = 1, 100000 do inner[i] = i end
return { [k] = inner }

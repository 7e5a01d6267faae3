-- escape: compare two equal strings of twenty megabytes, in a loop: one `<` reads both
-- through, in a single instruction.
-- where: object
-- expect: error call stopped: it used more than 1 s of CPU time
-- isolate: yes
local a = string.rep("x", 20000000)
local b = string.rep("x", 20000000)
local n = 0
for i = 1, 1e9 do if a < b then n = n + 1 end end
return n

-- escape: run cheap instructions long enough for the clock readings to grow far apart,
-- then compare strings of twenty megabytes in a loop, hoping the next reading comes late.
-- where: fetch
-- expect: error call stopped: it used more than 1 s of CPU time
-- isolate: yes
local x = 0
for i = 1, 300000 do x = x + i end
local a = string.rep("x", 20000000)
local b = string.rep("x", 20000000)
local n = 0
for i = 1, 1e9 do if a < b then n = n + 1 end end
return n

-- escape: sort long strings with a C function as the comparator (rawequal): C's sort
-- would run from comparison to comparison without one Lua instruction for the hook.
-- where: fetch
-- expect: error call stopped: it used more than 1 s of CPU time
-- isolate: yes
local a = string.rep("x", 5000000)
local b = a:sub(1, -2) .. "x"
local t = {}
for i = 1, 200000 do t[i] = i % 2 == 0 and a or b end
table.sort(t, rawequal)
return #t

-- escape: a find the router leaves to C, since one call ends in milliseconds, called
-- in a loop: the instruction budget allows hours of it (five instructions a call).
-- where: fetch
-- expect: error call stopped: it used more than 1 s of CPU time
-- isolate: yes
local p = string.rep(".", 200) .. "y"
local s = string.rep("x", 13000)
for i = 1, 1e9 do s:find(p) end

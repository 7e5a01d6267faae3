-- escape: sort 2,000 copies of one four-megabyte string: every comparison reads it
-- through, in C, and the table holds little memory.
-- where: step
-- expect: error call stopped: it used more than 1 s of CPU time
-- isolate: yes
local s = string.rep("a", 4000000)
local t = {}
for i = 1, 2000 do t[i] = s end
table.sort(t)
return #t

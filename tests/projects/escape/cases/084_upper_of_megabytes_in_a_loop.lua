-- escape: s:upper() on ten megabytes, in a loop: each call is one instruction of the
-- budget and several milliseconds of C.
-- where: step
-- expect: error call stopped: it used more than 1 s of CPU time
-- isolate: yes
local s = string.rep("x", 10000000)
for i = 1, 1e9 do local u = s:upper() end

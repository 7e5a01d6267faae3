-- escape: a plain find whose every candidate compares half a megabyte: too slow for
-- C, and in the Lua port each comparison is one instruction.
-- where: fetch
-- expect: error call stopped: it used more than 1 s of CPU time
-- isolate: yes
return (string.rep("a", 1000000):find(string.rep("a", 500000) .. "b", 1, true))

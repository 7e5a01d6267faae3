-- escape: an exponential pattern in a fetch handler's gmatch loop: the handler's
-- instruction budget must stop it and the platform keep answering.
-- where: fetch
-- expect: error call stopped: it ran past its budget
-- isolate: yes
local n = 0
for _ in string.gmatch(string.rep("a", 30), string.rep("a?", 30) .. string.rep("a", 30) .. "b") do n = n + 1 end
return n

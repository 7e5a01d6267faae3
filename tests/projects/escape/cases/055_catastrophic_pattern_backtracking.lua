-- escape: an exponential Lua pattern (string.find runs in C, where the instruction hook
-- never fires), in a step with a timeout that should stop it.
-- where: run
-- expect: contained
-- isolate: yes
local wf = ...
return wf:step("match", { timeout = "1s" }, function()
    return string.find(string.rep("a", 40), string.rep("a*", 20) .. "b")
end)

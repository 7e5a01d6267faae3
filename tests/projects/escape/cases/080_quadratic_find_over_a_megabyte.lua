-- escape: one quantifier is enough: "a*b" over a megabyte of "a" scans the rest of the
-- subject from every start, 5 * 10^11 steps in C.
-- where: run
-- expect: contained
-- isolate: yes
local wf = ...
return wf:step("find", { timeout = "1s" }, function()
    return string.find(string.rep("a", 1000000), "a*b")
end)

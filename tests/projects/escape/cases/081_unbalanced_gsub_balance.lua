-- escape: %b() over a megabyte of "(" never closes, and gsub retries from every position:
-- quadratic in C, with no quantifier in the pattern.
-- where: run
-- expect: contained
-- isolate: yes
local wf = ...
return wf:step("balance", { timeout = "1s" }, function()
    return (string.rep("(", 1000000):gsub("%b()", ""))
end)

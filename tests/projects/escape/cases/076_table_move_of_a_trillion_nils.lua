-- escape: table.move over a range of 2^40 empty slots: C moves nil after nil without a
-- hook, in a step with a timeout that should stop it.
-- where: run
-- expect: contained
-- isolate: yes
local wf = ...
return wf:step("move", { timeout = "1s" }, function()
    return table.move({}, 1, 2 ^ 40, 1, {}) ~= nil
end)

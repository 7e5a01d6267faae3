-- escape: yield a table shaped like an engine command ({ op = "wait" ... }) from a user
-- coroutine in the workflow function, hoping the engine takes it for a real wait.
-- where: run
-- expect: result "wait"
local wf, svc = ...
local co = coroutine.wrap(function()
    coroutine.yield({ op = "wait", kind = "sleep", names = {}, timeout = "1h" })
    return "done"
end)
local got = co()
-- The run completes at once (it did not sleep): the table came back to this code.
return type(got) == "table" and got.op or tostring(got)

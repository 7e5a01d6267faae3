-- escape: get hold of the engine's coroutine from a step body (to resume, close or inspect
-- it) through coroutine.running, isyieldable, status and close.
-- where: step
-- expect: result "nil,true,false,refused,refused"
local co, main = coroutine.running()
local status_ok = pcall(coroutine.status, co)
local close_ok = pcall(coroutine.close, co)
return table.concat({
    tostring(co), tostring(main), tostring(coroutine.isyieldable()),
    status_ok and "status read" or "refused", close_ok and "closed" or "refused",
}, ",")

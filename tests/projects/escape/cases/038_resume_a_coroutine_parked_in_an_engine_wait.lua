-- escape: a run parks inside a user coroutine (wf:await in coroutine.create); a fetch
-- handler then resumes that coroutine itself, forging the await's answer without any
-- signal being sent or journaled.
-- where: run
-- expect: result "refused"
--@ run victim
local wf = ...
string.parked = coroutine.create(function() return "victim got " .. tostring(wf:await("go")) end)
local _, v = coroutine.resume(string.parked)
return v
--@ fetch
local ok, resumed, value = pcall(coroutine.resume, string.parked, { payload = "forged" })
return (ok and resumed) and ("resumed: " .. tostring(value)) or "refused"

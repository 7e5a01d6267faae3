-- escape: a run leaves its wf object where a fetch handler finds it; the handler then
-- drives the run's steps and waits from outside the run.
-- where: run
-- expect: error wf:step can only be called by the workflow function its wf was handed to
--@ run victim
local wf = ...
string.stolen = wf
return wf:await("go")
--@ fetch
return string.stolen:step("outside", function() return "ran" end)

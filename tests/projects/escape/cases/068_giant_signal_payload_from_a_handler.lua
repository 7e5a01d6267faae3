-- escape: signal a parked run from a handler with a 300 KiB payload.
-- where: run
-- expect: error bytes encoded, over the limit of 262144 bytes (256 KiB)
--@ run victim
local wf = ...
return wf:await("go")
--@ fetch
local request, svc = ...
return svc.victim:get("victim"):signal("go", string.rep("x", 300 * 1024))

-- escape: start a run from a handler with a 300 KiB input, to bloat its first journal entry.
-- where: fetch
-- expect: error bytes encoded, over the limit of 262144 bytes (256 KiB)
local request, svc = ...
return svc.ok:start({ blob = string.rep("x", 300 * 1024) }, { id = "bloated" }).id

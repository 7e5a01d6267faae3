-- escape: return a 300 KiB string as a run's result.
-- where: run
-- expect: error bytes encoded, over the limit of 262144 bytes (256 KiB)
return string.rep("x", 300 * 1024)

-- escape: record a 300 KiB string as a step result, to bloat the journal (its quotes make
-- 307202 bytes encoded).
-- where: step
-- expect: error the result of step 'case' is 307202 bytes encoded, over the limit of 262144 bytes (256 KiB)
return string.rep("x", 300 * 1024)

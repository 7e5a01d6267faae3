-- escape: record raw bytes that are not UTF-8 as a step result.
-- where: step
-- expect: error the result of step 'case' holds a string that is not valid UTF-8 at [1]
return "\255\254"

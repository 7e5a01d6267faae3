-- escape: string.rep of an empty string 2^63-1 times: C's loop copies nothing
-- math.maxinteger times, out of reach of the instruction hook.
-- where: step
-- expect: result 0
-- isolate: yes
return #string.rep("", math.maxinteger) + #string.rep("", math.maxinteger, "")

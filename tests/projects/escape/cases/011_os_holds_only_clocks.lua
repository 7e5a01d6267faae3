-- escape: reach the process through os (execute, getenv, remove, rename, exit, tmpname,
-- setlocale) from an object method; os must hold nothing but the clock functions.
-- where: object
-- expect: result "clock,date,difftime,time"
local keys = {}
for k in pairs(os) do keys[#keys + 1] = k end
table.sort(keys)
return table.concat(keys, ",")

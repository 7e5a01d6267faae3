-- escape: loop forever inside table.sort's comparator (Lua code called from C).
-- where: step
-- expect: error ran past its budget of 2000000 Lua instructions
local t = {}
for i = 1, 100 do t[i] = 100 - i end
table.sort(t, function(a, b) while true do end end)

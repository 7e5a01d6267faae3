-- escape: table.concat over a table whose __index answers "" for every index, up to
-- math.maxinteger: C's loop would never end and never grow.
-- where: fetch
-- expect: error call stopped: it ran past its budget
-- isolate: yes
local t = setmetatable({}, { __index = function() return "" end })
return #table.concat(t, "", 1, math.maxinteger)

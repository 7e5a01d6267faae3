-- escape: recurse through a C function (string.gsub calling back into Lua), to overflow the
-- C stack of the process rather than Lua's.
-- where: fetch
-- expect: error stack overflow
local function again() return (string.gsub("x", "x", again)) end
return again()

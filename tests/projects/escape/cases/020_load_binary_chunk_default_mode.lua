-- escape: load a binary chunk without naming a mode (Lua's own default is "bt").
-- where: fetch
-- expect: result "attempt to load a binary chunk (mode is 't')"
local f, err = load("\27Lua\84\0\25\147\13\10\26\10\4\8\8")
return f == nil and err or "loaded"

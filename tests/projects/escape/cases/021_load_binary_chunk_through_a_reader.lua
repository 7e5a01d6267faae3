-- escape: hand load a reader function that returns a binary chunk piece by piece.
-- where: step
-- expect: result "attempt to load a binary chunk (mode is 't')"
local pieces = { "\27", "Lua", "\84\0", "\25\147\13\10\26\10" }
local i = 0
local f, err = load(function() i = i + 1 return pieces[i] end, "reader")
return f == nil and err or "loaded"

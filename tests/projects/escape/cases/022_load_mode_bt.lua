-- escape: ask load for binary chunks outright with mode "b" or "bt", from an object method.
-- where: object
-- expect: result ["load: only text chunks are allowed (mode \"t\"); binary chunks are refused", "load: only text chunks are allowed (mode \"t\"); binary chunks are refused"]
local _, e1 = pcall(load, "\27Lua", "x", "bt")
local _, e2 = pcall(load, "return 1", "x", "b", {})
return { e1, e2 }

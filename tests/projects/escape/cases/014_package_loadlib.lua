-- escape: load a native library with package.loadlib (found by name, through the
-- environment's __index, or in a fresh chunk).
-- where: run
-- expect: result "nil,nil,nil,false"
local loadlib_ok = pcall(function() return package.loadlib("libc.so.6", "system") end)
return table.concat({
    type(package),
    type(getmetatable(_ENV).__index(_ENV, "package")),
    type(load("return package")()),
    tostring(loadlib_ok),
}, ",")

-- escape: reach the debug library (getupvalue would open the engine's upvalues, sethook
-- would lift the instruction budget) by name, through __index, a fresh chunk and require.
-- where: object
-- expect: result "nil,nil,nil,refused"
return table.concat({
    type(debug),
    type(getmetatable(_ENV).__index(_ENV, "debug")),
    type(load("return debug")()),
    pcall(require, "debug") and "loaded" or "refused",
}, ",")

-- escape: reach collectgarbage (to stop the collector, or to time the engine) and Lua 5.1's
-- gcinfo, by name, through __index, a fresh chunk and require.
-- where: queue
-- expect: result "nil,nil,nil,nil,refused"
return table.concat({
    type(collectgarbage),
    type(gcinfo),
    type(getmetatable(_ENV).__index(_ENV, "collectgarbage")),
    type(load("return collectgarbage")()),
    pcall(require, "collectgarbage") and "loaded" or "refused",
}, ",")

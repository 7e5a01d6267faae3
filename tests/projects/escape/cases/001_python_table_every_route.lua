-- escape: reach lupa's `python` table by name, through _G, rawget, the environment's own
-- __index, a freshly loaded chunk and require.
-- where: fetch
-- expect: result ["nil", "nil", "nil", "nil", "nil", "refused"]
local via_index = getmetatable(_ENV).__index(_ENV, "python")
local ok = pcall(require, "python")
return {
    type(python),
    type(_G.python),
    type(rawget(_G, "python")),
    type(via_index),
    type(load("return python")()),
    ok and "loaded" or "refused",
}

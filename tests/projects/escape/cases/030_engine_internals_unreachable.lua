-- escape: find the engine's own tables (host, engine, base, ctx, budget, the engine yield
-- marker) through the environment's __index, _G and a fresh chunk, then tear down this
-- script's environment.
-- where: fetch
-- expect: result "nil,nil,nil,nil,nil,nil,nil,nil,nil,nil"
local index, rawget, type, load, concat = getmetatable(_ENV).__index, rawget, type, load, table.concat
local out = {}
for _, name in ipairs({ "host", "engine", "base", "ctx", "budget", "ENGINE", "extras", "handlers" }) do
    out[#out + 1] = type(index(_ENV, name) or rawget(_G, name))
end
out[#out + 1] = type(load("return host")())
setmetatable(_ENV, nil)
out[#out + 1] = type(print)
return concat(out, ",")

-- escape: load genuine Lua 5.4 bytecode (string.dump of `return 'bytecode ran'`, made
-- outside the sandbox and carried in as hex) with every mode.
-- where: run
-- expect: result ["attempt to load a binary chunk (mode is 't')", "load: only text chunks are allowed (mode \"t\"); binary chunks are refused", "load: only text chunks are allowed (mode \"t\"); binary chunks are refused"]
local hex = "1b4c7561540019930d0a1a0a0408087856000000000000000000000028774001808080000102845100000003"
    .. "000000460002014600010181048d62797465636f64652072616e810100008080808080"
local bytes = hex:gsub("..", function(h) return string.char(tonumber(h, 16)) end)
local out = {}
local f, err = load(bytes)
out[1] = f and f() or err
for _, mode in ipairs({ "b", "bt" }) do
    local ok, r = pcall(load, bytes, "=bytecode", mode)
    out[#out + 1] = ok and (r and r() or "nil") or r
end
return out

-- escape: read or replace the metatables of workflow and run handles (their method tables
-- are shared by every handle in the Lua state).
-- where: fetch
-- expect: result ["false", "false", "cannot change a protected metatable", "cannot change a protected metatable"]
local request, svc = ...
local out = {}
local handles = { svc.ok, svc.ok:get("nobody") }
for _, h in ipairs(handles) do out[#out + 1] = tostring(getmetatable(h)) end
for _, h in ipairs(handles) do
    local ok, err = pcall(setmetatable, h, { __index = function() return function() return "forged" end end })
    out[#out + 1] = ok and "replaced" or err
end
return out

-- escape: fill the Lua state to the brim, swallow the memory error with pcall and keep the
-- hoard alive in a table every script shares, so the next call on this state starves.
-- where: fetch
-- expect: result "swallowed"
string.hoard = {}
pcall(function()
    for i = 1, 1e9 do string.hoard[i] = string.rep("z", 65536) .. i end
end)
return "swallowed"

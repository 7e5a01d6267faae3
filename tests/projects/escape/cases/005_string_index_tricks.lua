-- escape: use strings' shared metatable to reach the real string library or metamethods:
-- ("").__index, ("").__gc, ("").__metatable, method lookups for dump/load, and
-- getmetatable("").__index.
-- where: step
-- expect: result {"fields": "nil,nil,nil,nil,nil,nil,nil", "metatable": "false", "index_of_it": "error"}
local fields = {}
for _, k in ipairs({ "__index", "__gc", "__metatable", "__name", "dump", "load", "python" }) do
    fields[#fields + 1] = type(("")[k])
end
local ok = pcall(function() return getmetatable("").__index end)
return {
    fields = table.concat(fields, ","),
    metatable = tostring(getmetatable("")),
    index_of_it = ok and "reached" or "error",
}

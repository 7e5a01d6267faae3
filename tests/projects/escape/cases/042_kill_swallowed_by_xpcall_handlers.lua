-- escape: outlive the instruction budget through xpcall message handlers that loop or
-- swallow the error, from an object method.
-- where: object
-- expect: error ran past its budget of 2000000 Lua instructions
while true do
    xpcall(function() while true do end end, function() return "swallowed" end)
    xpcall(function() error("x") end, function() while true do end end)
end

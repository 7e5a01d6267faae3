-- escape: never return from the fetch handler.
-- where: fetch
-- expect: error ran past its budget of 2000000 Lua instructions
while true do end

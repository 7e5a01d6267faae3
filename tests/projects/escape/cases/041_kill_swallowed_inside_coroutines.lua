-- escape: outlive the instruction budget by catching its error: endless loops inside new
-- coroutines, resumed under pcall, in an endless loop of the fetch handler.
-- where: fetch
-- expect: error ran past its budget of 2000000 Lua instructions
while true do
    pcall(coroutine.resume, coroutine.create(function() while true do end end))
    pcall(coroutine.wrap(function() while true do end end))
end

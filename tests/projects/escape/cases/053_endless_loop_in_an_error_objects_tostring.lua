-- escape: fail a step body with an error object whose __tostring never returns; the engine
-- turns the error into text after the body's coroutine has ended, outside the budget.
-- where: step
-- expect: contained
-- isolate: yes
error(setmetatable({}, { __tostring = function() while true do end end }))

-- escape: never return from a queue handler, holding its message.
-- where: queue
-- expect: error ran past its budget of 2000000 Lua instructions
repeat local x = 1 until false

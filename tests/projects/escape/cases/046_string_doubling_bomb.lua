-- escape: double a string until memory runs out, inside a step body.
-- where: step
-- expect: error ran out of memory (the Lua state's limit is 64 MiB)
local s = "x"
while true do s = s .. s end

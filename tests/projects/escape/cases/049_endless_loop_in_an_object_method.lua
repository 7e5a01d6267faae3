-- escape: never return from an object method, holding its key.
-- where: object
-- expect: error ran past its budget of 2000000 Lua instructions
local self = ...
local n = 0
while true do n = n + 1 self.state.n = n end

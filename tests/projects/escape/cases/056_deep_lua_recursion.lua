-- escape: recurse without end in Lua (not a tail call), to overflow the stack.
-- where: step
-- expect: error stack overflow
local function deeper(n) return deeper(n + 1) + 1 end
return deeper(1)

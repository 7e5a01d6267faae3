-- escape: recurse through __index and __tostring metamethods that call themselves.
-- where: object
-- expect: error stack overflow
local loop = setmetatable({}, {})
getmetatable(loop).__index = function(t, k) return t[k] end
getmetatable(loop).__tostring = function(t) return tostring(t) end
return loop.anything

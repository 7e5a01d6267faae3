-- escape: an endless loop in a __gc metamethod. Lua runs finalizers with debug hooks
-- switched off, so the instruction budget and step timeouts never see it.
-- where: step
-- expect: contained
-- isolate: yes
setmetatable({}, { __gc = function() while true do end end })
local t = {}
for i = 1, 200000 do t[i] = { i } end
return "allocated"

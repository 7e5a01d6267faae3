-- escape: return a table nested a thousand deep from a step body; decoding its record
-- overflows Python's recursion limit inside the engine.
-- where: step
-- expect: contained
local t = {}
for i = 1, 1000 do t = { t } end
return t

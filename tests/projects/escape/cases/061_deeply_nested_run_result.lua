-- escape: return a table nested a thousand deep from the workflow function.
-- where: run
-- expect: contained
local t = {}
for i = 1, 1000 do t = { t } end
return t

-- escape: answer a request with a response table nested a thousand deep.
-- where: response
-- expect: contained
local t = {}
for i = 1, 1000 do t = { t } end
return { status_code = 200, headers = { deep = t }, body = "" }

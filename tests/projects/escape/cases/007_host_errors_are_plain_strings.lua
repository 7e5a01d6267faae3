-- escape: make host calls fail (bad JSON, bad SQL, an unknown object method, a bad kv call)
-- hoping a Python exception object reaches Lua as the error value.
-- where: fetch
-- expect: result ["string", "string", "string", "string"]
local request, svc = ...
local kinds = {}
for _, f in ipairs({
    function() return json.parse("{") end,
    function() return svc.db:query("SELEC nonsense") end,
    function() return svc.Case("k"):no_such_method() end,
    function() return svc.kv:get() end,
}) do
    local ok, e = pcall(f)
    kinds[#kinds + 1] = ok and "no error" or type(e)
end
return kinds

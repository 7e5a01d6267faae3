-- escape: read Python attributes (__class__, __dict__, __globals__, _obj ...) off every
-- kind of value the platform hands to Lua, as lupa would expose them on a wrapped object.
-- (An object stub answers every key with a method of the object, so it is left out.)
-- where: fetch
-- expect: result {"found": 0}
local request, svc = ...
local subjects = {
    request = request, headers = request.headers, query = request.query, body = request.body,
    workflow_handle = svc.ok, run_handle = svc.ok:get("nobody"), kv = svc.kv, db = svc.db,
    queue = svc.notes, class = svc.Case, print = print, json = json, wf_methods = svc.ok.start,
    number = 1, string = "s", parsed = json.parse("{}"), now = os.time(),
}
local attrs = { "__class__", "__dict__", "__globals__", "__builtins__", "__init__",
    "__subclasses__", "__getattribute__", "__import__", "_obj", "__module__", "__self__" }
local found = {}
for name, v in next, subjects do
    for _, a in ipairs(attrs) do
        local ok, got = pcall(function() return v[a] end)
        if ok and got ~= nil then found[#found + 1] = name .. "." .. a .. "=" .. type(got) end
    end
end
table.sort(found)
return { found = #found, first = found[1] }

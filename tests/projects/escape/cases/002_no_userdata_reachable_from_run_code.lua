-- escape: find a Python object (lupa userdata) anywhere run code can reach: every global,
-- the wf object and its fields, the input, run and workflow handles, service handles and a
-- step's recorded values, walking tables and their metatables.
-- where: run
-- expect: result {"found": 0, "walked_enough": true}
local wf, svc = ...
local recorded = wf:step("values", function() return { a = { 1, 2.5, "x", true } }, "y" end)
local roots = {
    wf = wf, id = wf.id, workflow = wf.workflow, recorded = recorded, svc = svc,
    run = svc.victim:get("nobody"), env = _ENV, G = _G,
}
local names = { "assert", "error", "ipairs", "next", "pairs", "pcall", "xpcall", "rawequal",
    "rawget", "rawlen", "rawset", "select", "setmetatable", "getmetatable", "tonumber",
    "tostring", "type", "print", "string", "table", "math", "utf8", "os", "coroutine", "json",
    "log", "uuid", "workflow", "workflows", "load", "require", "database", "object", "objects",
    "kv", "queue", "secret", "on", "http", "crypto", "Jwt" }
for _, n in ipairs(names) do roots["global " .. n] = _ENV[n] end
local seen, found, walked = {}, {}, 0
local function walk(v, path)
    local t = type(v)
    if t == "userdata" then found[#found + 1] = path return end
    if t ~= "table" or seen[v] then return end
    seen[v] = true
    walked = walked + 1
    local mt = getmetatable(v)
    if type(mt) == "table" then walk(mt, path .. "<mt>") elseif type(mt) == "userdata" then found[#found + 1] = path .. "<mt>" end
    for k, x in next, v do
        walk(k, path .. "[key]")
        walk(x, path .. "." .. tostring(k))
    end
end
for k, v in next, roots do walk(v, k) end
return { found = #found, first = found[1], walked_enough = walked > 20 }

-- escape: find a Python object in what the platform hands a fetch handler: the request and
-- every service's answers (kv, database, objects, queues, json, crypto, Jwt, clocks, uuid).
-- where: fetch
-- expect: result {"found": 0, "walked_enough": true}
local request, svc = ...
svc.kv:put("k", { nested = { 1, 2, { deep = "x" } } })
svc.db:exec("INSERT INTO notes (id, body) VALUES (?, ?)", { 1, "hello" })
local token = Jwt.sign({ sub = "ada", n = 1 }, string.rep("k", 32))
local values = {
    request = request,
    put = { svc.kv:put("k2", 1) },
    get = { svc.kv:get("k") },
    list = { svc.kv:list({ prefix = "k" }) },
    exec = { svc.db:exec("UPDATE notes SET body = body") },
    query = { svc.db:query("SELECT * FROM notes") },
    first = { svc.db:first("SELECT * FROM notes") },
    send = { svc.notes:send({ a = 1 }) },
    parsed = { json.parse('{"a":[1,2.5,null,{"b":true}]}') },
    crypto = { crypto.sha256("x"), crypto.random_bytes(8), crypto.base64_decode("AAE=") },
    jwt = { Jwt.verify(token, string.rep("k", 32)) },
    clocks = { os.time(), os.clock(), os.date("*t"), uuid.v4() },
    started = { svc.ok:start(nil, { id = "handler-start" }) },
}
local seen, found, walked = {}, {}, 0
local function walk(v, path)
    local t = type(v)
    if t == "userdata" then found[#found + 1] = path return end
    if t ~= "table" or seen[v] then return end
    seen[v] = true
    walked = walked + 1
    local mt = getmetatable(v)
    if type(mt) == "table" then walk(mt, path .. "<mt>") end
    for k, x in next, v do walk(k, path .. "[key]") walk(x, path .. "." .. tostring(k)) end
end
walk(values, "values")
return { found = #found, first = found[1], walked_enough = walked > 20 }

-- json, uuid and log tests (tests/services/test_json_uuid_log.py).

-- The Lua type of every value in a parsed document, by path ("integer", "float", "string"...).
local function types(v, path, out)
    local t = type(v)
    if t == "number" then out[path] = math.type(v)
    elseif t == "table" then
        out[path] = "table"
        for k, item in pairs(v) do types(item, path .. "." .. tostring(k), out) end
    else out[path] = t end
    return out
end

local ops = {}

function ops.parse(q)
    local v = json.parse(q.text)
    return { value = v, types = types(v, "$", {}) }
end
-- Parses without returning the value (NaN, for one, could not be encoded back).
function ops.parse_only(q)
    local v = json.parse(q.text)
    return type(v)
end
function ops.encode_sample(q)
    return json.encode({ b = 1, a = { z = true, y = "s" }, c = { 1, 2, 3 }, f = 1.5, i = 2, big = 9007199254740993 })
end
function ops.encode_floats(q) return json.encode({ 2.0, 0.1, -0.0, 1e300 }) end
function ops.encode_strings(q) return json.encode({ "quote \" backslash \\ newline \n tab \t", "é€😀", "\1" }) end
function ops.encode_empty(q) return json.encode({}) end
function ops.encode_nil(q) return json.encode(nil) end
function ops.encode_bad(q)
    local bad = {
        fn = { f = function() end },
        mixed = { 1, 2, x = 3 },
        holes = { 1, nil, 3 },
        nan = { n = 0 / 0 },
        cycle = (function() local t = {}; t.self = t; return t end)(),
    }
    return json.encode(bad[q.kind])
end
function ops.round_trip(q)
    local back = json.parse(json.encode(json.parse(q.text)))
    return types(back, "$", {})
end
function ops.uuids(q)
    local out = {}
    for i = 1, q.n do out[i] = uuid.v4() end
    return out
end
function ops.log(q)
    log.info("info line", { user = "ada", n = 3 })
    log.warn("warn line", { nested = { ok = true } })
    log.error("error line")
    log.info("bad fields", { f = function() end })
    print("printed", 42)
end

-- POST { op, ... }: the op's result, or its error.
on "fetch" (function(request)
    local q = json.parse(request.body)
    local ok, r = pcall(ops[q.op], q)
    return { status_code = 200, body = json.encode({ ok = ok, value = ok and r or nil, error = not ok and r or nil }) }
end)

-- Logs from the workflow function and a step body carry the run's id.
workflow "logs" (function(wf, input)
    log.info("in run", { where = "function" })
    wf:step("s", function() log.warn("in step", { where = "body" }) end)
    wf:await("go")
    log.info("after wait")
    return "done"
end)

-- uuid.v4 in run code: journaled, the same after a replay.
workflow "ids" (function(wf, input)
    local a = uuid.v4()
    local b = wf:step("in-body", function() return uuid.v4() end)
    wf:await("go")
    return { a = a, b = b, a_again = a }
end)

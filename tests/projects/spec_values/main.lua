-- Values that cross the journal (SPEC 3: "A step's values must be JSON-like").

workflow "shapes" (function(wf, input)
    local v = wf:step("vals", function()
        return {
            one = 1, half = 1.5, two_f = 2.0, neg = -7, zero = 0, big = 9007199254740993,
            nested = { a = { b = { 1, 2, { c = "d" } } } },
            arr = { "x", "y", "z" }, yes = true, no = false, s = "text ✓", empty = {},
        }
    end)
    local a, b, c = wf:step("multi", function() return 1, nil, 3 end)
    local count = select("#", wf:step("multi-count", function() return 1, nil, 3, nil end))
    local none = select("#", wf:step("nothing", function() end))
    wf:sleep("1s")
    return {
        v = v,
        types = {
            one = math.type(v.one), half = math.type(v.half), two_f = math.type(v.two_f),
            neg = math.type(v.neg), big = math.type(v.big), nested = math.type(v.nested.a.b[2]),
            input_n = math.type(input.n), input_f = math.type(input.f),
        },
        big_exact = v.big == 9007199254740993,
        arr_len = #v.arr, nested_len = #v.nested.a.b, empty_is_table = type(v.empty) == "table",
        multi = { a = a, b_nil = b == nil, c = c, count = count, none = none },
    }
end)

workflow "echo" (function(wf, input)
    local p = wf:await("data")
    return { payload = p, kind = math.type(p.n), fkind = math.type(p.f), input = input }
end)

workflow "bad-shape" (function(wf, input)
    wf:step("make-" .. input.kind, function()
        if input.kind == "function" then return { cb = function() end } end
        if input.kind == "cycle" then local t = {}; t.self = t; return t end
        if input.kind == "mixed" then return { 1, 2, x = 3 } end
        if input.kind == "second" then return 1, { f = print } end
    end)
    return "unreachable"
end)

workflow "bad-return" (function(wf, input)
    if input.kind == "function" then return { cb = function() end } end
    if input.kind == "cycle" then local t = {}; t.self = t; return t end
    return { 1, x = 2 }
end)

workflow "big-step" (function(wf, input)
    wf:step("big", function() return string.rep("x", input.size) end)
    return "unreachable"
end)

workflow "big-return" (function(wf, input)
    return string.rep("x", input.size)
end)

workflow "waiter" (function(wf, input)
    return wf:await("data")
end)

-- Starts a child from a step with an oversized input.
workflow "big-child" (function(wf, input)
    wf:step("spawn", function()
        return workflows "waiter":start(string.rep("x", input.size), { id = "child" }).id
    end)
    return "unreachable"
end)

-- Signals run "w" from a step with a payload of `input.size` bytes.
workflow "big-signal" (function(wf, input)
    wf:step("send", function()
        return workflows "waiter":get("w"):signal("data", string.rep("x", input.size))
    end)
    return "unreachable"
end)

on "fetch" (function(request)
    local body = json.parse(request.body)
    local run = workflows "waiter":get(body.id)
    local payload
    if body.kind == "function" then payload = { cb = function() end }
    elseif body.kind == "big" then payload = string.rep("x", body.size)
    else payload = { ok = true } end
    local ok, err = pcall(function() return run:signal("data", payload) end)
    return { status_code = 200, body = json.encode({ ok = ok, err = err }) }
end)

-- A step that returns `n` copies of one price (a float).
workflow "prices" (function(wf, input)
    local prices = wf:step("prices", function()
        local out = {}
        for i = 1, input.n do out[i] = input.price end
        return out
    end)
    return { count = #prices, first = prices[1] }
end)

-- bench/branches.py: ten branches, each a step whose object call takes about a second.
local Slow = objects "Slow"

-- Under lunaflow dev the object is this one: a call to a local server that answers after a
-- second (its URL is the input). In the harnesses a Python stand-in sleeps instead.
object "Slow" {
    call = function(self, url, n)
        local r = http.get(url .. "?n=" .. n, { timeout = 10 })
        return tonumber(r.body)
    end,
}

workflow "call" (function(wf, item)
    return wf:step("call", function() return Slow("svc-" .. item.n):call(item.url, item.n) end)
end)

-- The branches: one child run each, all at once.
workflow "fan" (function(wf, input)
    local items = {}
    for i = 1, input.n do items[i] = { n = i, url = input.url } end
    return wf:map(items, "call")
end)

-- The same calls one after another, for comparison.
workflow "serial" (function(wf, input)
    local out = {}
    for i = 1, input.n do
        out[i] = wf:step("call", function() return Slow("svc-" .. i):call(input.url, i) end)
    end
    return out
end)

on "fetch" (function(request)
    local input = json.parse(request.body)
    local run = workflows(request.path:sub(2)):start(input, { id = input.id })
    return { status_code = 201, body = json.encode({ run = run.id }) }
end)

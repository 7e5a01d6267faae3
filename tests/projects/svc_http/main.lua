-- http tests (tests/services/test_http.py).
object "Fetcher" {
    get = function(self, url)
        local r = http.get(url)
        return { status = r.status, body = r.body }
    end,
}
local Fetcher = objects "Fetcher"

-- POST { op = "request" | "get" | "post" | "object" | "bytes", ... }: the response, or the error.
on "fetch" (function(request)
    local q = json.parse(request.body)
    local ok, r = pcall(function()
        if q.op == "request" then return http.request(q.req) end
        if q.op == "get" then return http.get(q.url, q.opts) end
        if q.op == "post" then return http.post(q.url, q.body, q.opts) end
        if q.op == "object" then return Fetcher("x"):get(q.url) end
        if q.op == "bytes" then
            -- Binary bodies both ways: send the 256 byte values, read the server's.
            local all = {}
            for i = 0, 255 do all[#all + 1] = string.char(i) end
            local sent = http.post(q.url .. "/echo", table.concat(all))
            local got = http.get(q.url .. "/bytes")
            return { echoed = json.parse(sent.body).body_hex, len = #got.body, hex = crypto.hex(got.body) }
        end
        error("unknown op " .. tostring(q.op))
    end)
    return { status_code = 200, body = json.encode({ ok = ok, value = ok and r or nil, error = not ok and r or nil }) }
end)

-- What run code sees of http: nil in the workflow function and in step bodies.
workflow "absent" (function(wf, input)
    local in_run = type(http)
    local in_body = wf:step("probe", function() return type(http) end)
    return { run = in_run, body = in_body }
end)

-- The seed's way: call an object from a step; the step records what it returned.
workflow "via-object" (function(wf, input)
    return wf:step("call", function() return Fetcher("w"):get(input.url) end)
end)

-- A queue handler is not run code either.
on "queue" ("pings", function(message)
    local r = http.get(message.body.url)
    log.info("pinged", { status = r.status })
end)
local pings = queue "pings"
workflow "ping" (function(wf, input)
    wf:step("send", function() pings:send({ url = input.url }) end)
end)

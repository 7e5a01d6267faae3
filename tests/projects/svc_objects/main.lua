-- Object service tests (tests/services/test_objects.py, tests/aws/test_object_calls.py).
local notes = kv "notes"

object "Counter" {
    -- Reads the count, works a while, then writes it back: two unserialized calls on one
    -- key would both read the same count and one increment would be lost.
    incr = function(self, by)
        local n = self.state.count or 0
        local x = 0
        for i = 1, 20000 do x = x + i end
        self.state.count = n + (by or 1)
        return self.state.count
    end,
    get = function(self) return self.state.count or 0 end,
    whoami = function(self) return self.key end,
    state = function(self) return self.state end,
    remember = function(self, k, v) self.state[k] = v end,
    -- Changes the state, then raises: the change must not be kept.
    boom = function(self)
        self.state.count = -1
        error("counter exploded", 0)
    end,
    -- Objects are not run code: they may reach the network.
    fetch = function(self, url)
        local r = http.get(url)
        self.state.last_status = r.status
        return r.body
    end,
    two = function(self) return "a", "b" end,
    -- Reads kv (no effect: may run again without harm) and counts in its state.
    peek = function(self, k)
        self.state.peeked = (self.state.peeked or 0) + 1
        return notes:get(k)
    end,
    -- Writes kv: an effect.
    poke = function(self, k, v)
        notes:put(k, v)
        self.state.poked = (self.state.poked or 0) + 1
    end,
    -- Replaces the whole state table.
    replace = function(self, v) self.state = v end,
    -- Leaves something in the state that cannot be stored.
    keep_function = function(self) self.state.cb = function() end end,
}

local Counter = objects "Counter"

-- POST { cls, key, method, args = [...] }: the call's results, or its error.
on "fetch" (function(request)
    local q = json.parse(request.body)
    local stub = objects(q.cls or "Counter")(q.key)
    local args = q.args or {}
    local r = table.pack(pcall(function() return stub[q.method](stub, table.unpack(args, 1, #args)) end))
    if not r[1] then return { status_code = 200, body = json.encode({ ok = false, error = r[2] }) } end
    return { status_code = 200, body = json.encode({ ok = true, value = r[2], values = { table.unpack(r, 2, r.n) } }) }
end)

-- Object calls inside steps; the step records what the object returned.
workflow "count" (function(wf, input)
    local n = wf:step("incr", function() return Counter(input.key):incr(1) end)
    local body = nil
    if input.url then
        body = wf:step("via-object", function() return Counter(input.key):fetch(input.url) end)
    end
    return { n = n, body = body }
end)

-- The step body reaching the network itself: http is absent there.
workflow "direct-http" (function(wf, input)
    return wf:step("direct", function() return http.get(input.url).body end)
end)

-- An object call in the workflow function itself: refused.
workflow "outside" (function(wf, input)
    local ok, e = pcall(function() return Counter("a"):incr(1) end)
    return { ok = ok, error = e }
end)

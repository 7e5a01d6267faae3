-- Key and value limits of kv and objects, the same on every store
-- (tests/aws/test_store_limits.py). POST a JSON body; the answer is
-- { ok = true, value = ... } or, with status 422, { ok = false, error = "..." }.
local store = kv "store"

object "Box" {
    -- self.state becomes { data = <n x's> }: n + 11 bytes of JSON.
    fill = function(self, n)
        self.state.data = string.rep("x", n)
        return n
    end,
    count = function(self)
        self.state.n = (self.state.n or 0) + 1
        return self.state.n
    end,
    size = function(self)
        return self.state.data and #self.state.data or 0
    end,
}
local Box = objects "Box"

local function answer(ok, out)
    if ok then
        return { status_code = 200, body = json.encode({ ok = true, value = out }) }
    end
    return { status_code = 422, body = json.encode({ ok = false, error = tostring(out) }) }
end

on "fetch" (function(request)
    local a = json.parse(request.body)
    if request.path == "/kv" then
        return answer(pcall(function()
            local ns = a.ns and kv(a.ns) or store
            if a.op == "put" then
                local value = a.value
                if a.size then value = string.rep("x", a.size) end
                ns:put(a.key, value)
                return true
            elseif a.op == "get" then
                local v = ns:get(a.key)
                if type(v) == "string" and #v > 100 then return #v end
                return v
            elseif a.op == "delete" then
                return ns:delete(a.key)
            elseif a.op == "list" then
                local keys = {}
                for i, e in ipairs(ns:list({ prefix = a.prefix })) do keys[i] = e.key end
                return keys
            end
            error("unknown op " .. tostring(a.op), 0)
        end))
    end
    if request.path == "/box" then
        return answer(pcall(function()
            local box = Box(a.key)
            if a.method == "fill" then return box:fill(a.n) end
            if a.method == "size" then return box:size() end
            return box:count()
        end))
    end
    return { status_code = 404, body = "" }
end)

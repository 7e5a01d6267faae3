-- Determinism in run code (the seed's table).
local cache = kv "cache"
local sales = database "sales" { migrations = "migrations/sales" }
local Account = objects "Account"
local mail = queue "mail"

workflow "child" (function(wf, input) return "child" end)

-- Reads every journaled source, records what the first run saw in a step, sleeps, and
-- returns what it reads after (possibly) replaying from the journal.
workflow "drift" (function(wf, input)
    local seen = {
        t = os.time(), c = os.clock(), r = math.random(), ri = math.random(1, 1000000),
        rr = math.random(5), u = uuid.v4(),
    }
    wf:step("record", function() return seen end)
    wf:sleep("1h")
    local after = { t = os.time(), r = math.random(), u = uuid.v4() }
    wf:await("go")
    return { seen = seen, after = after }
end)

-- Reads a secret before a wait, after it, and inside a step.
workflow "pinned" (function(wf, input)
    local first = secret "api-key"
    wf:await("go")
    local second = secret "api-key"
    local in_step = wf:step("read", function() return secret "api-key" end)
    return { first = first, second = second, in_step = in_step }
end)

-- Calls refused in run code, caught so the run can report the errors.
workflow "refusals" (function(wf, input)
    local out = {}
    local _, e1 = pcall(os.date, "%Y")
    local _, e2 = pcall(math.randomseed, 42)
    out.run = { date = e1, randomseed = e2 }
    out.body = wf:step("inside", function()
        local _, b1 = pcall(os.date, "%Y")
        local _, b2 = pcall(math.randomseed, 42)
        return { date = b1, randomseed = b2 }
    end)
    return out
end)

workflow "os-date" (function(wf, input)
    return os.date("%Y-%m-%d")
end)

workflow "randomseed" (function(wf, input)
    math.randomseed(1)
    return math.random()
end)

local effects = {
    kv = function() local r = cache:put("k", "v"); return r end,
    database = function() local r = sales:exec("UPDATE sales SET state = 'x' WHERE id = ?", { 1 }); return r end,
    object = function() local r = Account("ada"):notify("hi"); return r end,
    queue = function() local r = mail:send({ to = "ada" }); return r end,
    start = function() local r = workflows "child":start({}, { id = "child-1" }); return r.id end,
}
local order = { "kv", "database", "object", "queue", "start" }

-- Each effect outside a step is refused; the same calls inside a step go through.
workflow "effects" (function(wf, input)
    local outside = {}
    for _, k in ipairs(order) do
        local ok, e = pcall(effects[k])
        outside[k] = ok and "allowed" or e
    end
    wf:step("inside", function()
        for _, k in ipairs(order) do effects[k]() end
    end)
    return outside
end)

-- One effect outside a step, not caught: the run fails with the refusal.
workflow "effect-uncaught" (function(wf, input)
    wf:step("before", function() return 1 end)
    effects[input.kind]()
    return "unreachable"
end)

workflow "absent" (function(wf, input)
    local outside = { http = type(http), crypto = type(crypto), Jwt = type(Jwt),
        g_http = type(_G.http), g_crypto = type(_G.crypto), g_Jwt = type(_G.Jwt) }
    local inside = wf:step("look", function()
        return { http = type(http), crypto = type(crypto), Jwt = type(Jwt),
            g_http = type(_G.http), g_crypto = type(_G.crypto), g_Jwt = type(_G.Jwt) }
    end)
    return { outside = outside, inside = inside }
end)

on "fetch" (function(request)
    return { status_code = 200, body = json.encode({ http = type(http), crypto = type(crypto), Jwt = type(Jwt) }) }
end)

-- References taken at the top level, where the globals exist, then used in run code.
local captured = { http = http, crypto = crypto, Jwt = Jwt }

workflow "captured" (function(wf, input)
    local uses = {
        http = function() return captured.http.get("https://example.com/") end,
        crypto = function() return captured.crypto.sha256("x") end,
        Jwt = function() return captured.Jwt.sign({ sub = "ada" }, "key") end,
    }
    local outside, inside = {}, {}
    for _, k in ipairs({ "http", "crypto", "Jwt" }) do
        local ok, e = pcall(uses[k])
        outside[k] = ok and "allowed" or e
    end
    inside = wf:step("use", function()
        local r = {}
        for _, k in ipairs({ "http", "crypto", "Jwt" }) do
            local ok, e = pcall(uses[k])
            r[k] = ok and "allowed" or e
        end
        return r
    end)
    return { outside = outside, inside = inside, captured = type(captured.crypto) }
end)

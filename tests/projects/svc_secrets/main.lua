-- Secret tests (tests/services/test_secrets.py).

-- POST { name }: the secret's value as a handler reads it, or the error.
on "fetch" (function(request)
    local q = json.parse(request.body)
    local ok, v = pcall(secret, q.name)
    return { status_code = 200, body = json.encode({ ok = ok, value = ok and v or nil, error = not ok and v or nil }) }
end)

-- Reads the secret before a wait, after it, and inside a step.
workflow "pinned" (function(wf, input)
    local first = secret "api-key"
    wf:await("go")
    local second = secret "api-key"
    local in_step = wf:step("read", function() return secret "api-key" end)
    return { first = first, second = second, in_step = in_step }
end)

-- Reads only inside a step, after a wait: the first resolution happens there.
workflow "step-only" (function(wf, input)
    wf:await("go")
    local a = wf:step("read-1", function() return secret "api-key" end)
    wf:await("again")
    local b = wf:step("read-2", function() return secret "api-key" end)
    return { a = a, b = b }
end)

workflow "missing" (function(wf, input)
    return secret "never-set"
end)

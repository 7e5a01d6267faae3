-- Values crossing every boundary (tests/reliability_security/test_properties.py).

-- The input goes Python -> Lua, is recorded by a step (Lua -> journal), and after the
-- signal the run replays (the harness keeps no cached run), so the recorded value comes
-- back journal -> Lua; the result goes Lua -> Python.
workflow "echo" (function(wf, input)
    local recorded = wf:step("echo", function() return input end)
    local payload = wf:await("go")
    return { recorded = recorded, payload = payload }
end)

-- A step returns a value with something that is not JSON-like at the given path.
workflow "poison" (function(wf, input)
    return wf:step("bad", function()
        local leaves = {
            ["function"] = function() end,
            thread = coroutine.create(function() end),
            nan = 0 / 0,
            inf = -math.huge,
            bytes = "\255\254",
            mixed = { 1, x = 2 },
        }
        local value = leaves[input.leaf]
        for i = #input.path, 1, -1 do
            local key, t = input.path[i], {}
            if type(key) == "number" then
                for j = 1, key - 1 do t[j] = 0 end
            end
            t[key] = value
            value = t
        end
        return value
    end)
end)

workflow "sleep" (function(wf, input)
    wf:sleep(input.duration)
    return "slept"
end)

workflow "whoami" (function(wf)
    return wf:step("id", function() return wf.step_id end)
end)

-- A value as Lua's json.encode writes it (the same encoder writes a step's values).
workflow "encode" (function(wf, input)
    return json.encode(input)
end)

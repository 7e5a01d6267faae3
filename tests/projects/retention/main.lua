-- Workflows for tests/semantics/test_retention.py: ended runs are deleted 2 days after
-- their end ([runs] retention in lunaflow.toml), unless a parent still needs them.

-- Counts its runs in kv, so a run started again under an expired id shows it ran anew.
workflow "greet" (function(wf, input)
    local n = wf:step("count", function()
        local seen = (kv "greet"):get(wf.id) or 0
        (kv "greet"):put(wf.id, seen + 1)
        return seen + 1
    end)
    return { hello = input.name, run = n }
end)

-- A parent that starts a child which ends at once, waits for a signal (days, in the
-- tests), and only then reads the child's result.
workflow "late-reader" (function(wf, input)
    local c = wf:child("greet", { name = "child" }, { id = input.child_id })
    wf:await("go")
    return c:result()
end)

-- Waits for a signal, then ends: a signal that arrives after the end is set aside.
workflow "waiter" (function(wf, input)
    return wf:await("go")
end)

-- Waits for "go" and answers with its input and the signal's payload.
workflow "echo-after" (function(wf, input)
    local got = wf:await("go")
    return { input = input, got = got }
end)

-- Starts a child and waits for its result an hour at most, then ends: the child outlives it.
workflow "impatient" (function(wf, input)
    local c = wf:child("echo-after", "kid", { id = input.child_id })
    local ok = pcall(c.result, c, { timeout = "1h" })
    return { waited = ok }
end)

-- n steps: a journal of several chunks on AWS (each holds about 700 bytes).
workflow "many" (function(wf, input)
    local total = 0
    for i = 1, input.n do
        total = total + wf:step("s" .. i, function() return i end)
    end
    return { total = total, tag = input.tag }
end)

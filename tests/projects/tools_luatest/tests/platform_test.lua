-- The test platform `p`: start, signal, advance, get, journal, runs, cancel, resume, fetch.

test("advance fires a due timer, and not a minute before", function(p)
    local run = p:start("nap", { sleep = "1h" }, { id = "nap-1" })
    assert_eq(run.id, "nap-1")
    assert_eq(run.workflow, "nap")
    assert_eq(run.input, { sleep = "1h" })
    assert_eq(run.status, "sleeping")
    p:advance("59m")
    assert_eq(p:get("nap-1").status, "sleeping", "a minute before the timer")
    p:advance("1m")
    local done = p:get("nap-1")
    assert_eq(done.status, "completed")
    local before = p:journal("nap-1")[3].data.values[1]
    assert_eq(done.result.woke - before, 3600, "the fake clock moved by the hour advanced")
end)

test("advance fires an await's timeout", function(p)
    p:start("approval", nil, { id = "a-1" })
    p:advance("23h59m")
    assert_eq(p:get("a-1").status, "awaiting")
    p:advance("1m")
    assert_eq(p:get("a-1").result, { approved = false })
end)

test("journal lists a run's entries in order with kind, name and data", function(p)
    p:start("approval", nil, { id = "a-1" })
    assert_eq(p:signal("a-1", "approved", { by = "ada" }), true)
    local seen = {}
    for i, e in ipairs(p:journal("a-1")) do
        assert_eq(e.seq, i)
        seen[#seen + 1] = e.kind .. ":" .. tostring(e.name)
    end
    assert_eq(seen, { "run.started:approval", "wait:await", "wait.done:await", "run.completed:nil" })
    local journal = p:journal("a-1")
    assert_eq(journal[3].data.payload, { by = "ada" })
    assert_eq(journal[4].data.result, { approved = true, by = "ada" })
end)

test("a signal to an ended run is set aside: p:signal returns false", function(p)
    p:start("approval", nil, { id = "a-1" })
    assert_eq(p:signal("a-1", "approved", { by = "ada" }), true)
    assert_eq(p:signal("a-1", "approved", { by = "bob" }), false)
    assert_eq(p:get("a-1").result, { approved = true, by = "ada" })
end)

test("runs lists runs, filtered by status and workflow", function(p)
    p:start("approval", nil, { id = "a-1" })
    p:start("approval", nil, { id = "a-2" })
    p:start("nap", { sleep = "1h" }, { id = "n-1" })
    p:signal("a-1", "approved", { by = "ada" })
    local function ids(list)
        local out = {}
        for _, r in ipairs(list) do out[#out + 1] = r.id end
        table.sort(out)
        return out
    end
    assert_eq(ids(p:runs()), { "a-1", "a-2", "n-1" })
    assert_eq(ids(p:runs({ status = "awaiting" })), { "a-2" })
    assert_eq(ids(p:runs({ workflow = "nap" })), { "n-1" })
    assert_eq(ids(p:runs({ status = "completed", workflow = "approval" })), { "a-1" })
    assert_eq(#p:runs({ status = "failed" }), 0)
end)

test("cancel ends a run; resume retries a failed one", function(p)
    p:start("approval", nil, { id = "a-1" })
    p:cancel("a-1")
    assert_eq(p:get("a-1").status, "cancelled")
    p:start("count", { key = "k", need = 2 }, { id = "c-1" })
    local failed = p:get("c-1")
    assert_eq(failed.status, "failed")
    assert_true(failed.error:find("count 1 is below 2", 1, true), failed.error)
    p:resume("c-1")
    assert_eq(p:get("c-1").result, 2)
end)

test("assert_eq compares tables by value, whatever order their keys were written in", function(p)
    assert_eq({ a = 1, b = { 2, 3 }, c = { d = "x", e = true } }, { c = { e = true, d = "x" }, b = { 2, 3 }, a = 1 })
    assert_eq({}, {})
    assert_true(1, "a number is true")
    assert_eq(assert_eq(7, 7), 7, "assert_eq returns the actual value")
end)

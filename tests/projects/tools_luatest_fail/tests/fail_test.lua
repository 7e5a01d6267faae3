-- Every test here but the first fails; each at the line marked `-- fails:<what>`.

test("a passing test among failing ones", function(p)
    assert_eq(p:start("echo", { n = 1 }, { id = "e-1" }).result, { n = 1 })
end)

test("assert_eq on tables that differ", function(p)
    local run = p:start("echo", { a = 1, b = { 2, 3 } }, { id = "e-1" })
    assert_eq(run.result, { a = 1, b = { 2, 4 } }) -- fails:tables
end)

test("assert_eq with a message", function(p)
    assert_eq(p:start("echo", "x", { id = "e-1" }).result, "y", "the echo") -- fails:message
end)

test("assert_true on nil", function(p)
    assert_true(nil) -- fails:true
end)

test("assert_true with a message", function(p)
    assert_true(1 > 2, "one is not more than two") -- fails:true_message
end)

test("a plain error", function(p)
    error("boom") -- fails:error
end)

test("indexing nil", function(p)
    local run = nil
    return run.status -- fails:nil_index
end)

test("a refused platform call", function(p)
    p:get("no-such-run") -- fails:platform
end)

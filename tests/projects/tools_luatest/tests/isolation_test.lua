-- Each test gets a fresh platform: no runs, object state, stubs or clock moves leak.

local first_clock

test("a first test leaves runs, object state, a stub and a moved clock behind", function(p)
    first_clock = p:start("clock", nil, { id = "shared" }).result
    p:fetch("POST", "/count", { body = "k" })
    p:fetch("POST", "/count", { body = "k" })
    p:stub_object("Counter", "bump", function() return 99 end)
    p:advance("10d")
    assert_eq(#p:runs(), 1)
end)

test("the next test starts on a fresh platform", function(p)
    assert_true(first_clock ~= nil, "the first test ran")
    assert_eq(#p:runs(), 0, "runs of the previous test")
    assert_eq(p:start("clock", nil, { id = "shared" }).result, first_clock, "the clock")
    local r = p:fetch("POST", "/count", { body = "k" })
    assert_eq(json.parse(r.body).n, 1, "object state or stub of the previous test")
end)

-- The subscription's own tests: `lunaflow test examples/subscription`.

local function show(p, id)
    return json.parse(p:fetch("GET", "/subs/" .. id).body)
end

test("24 months are 24 generations of one run, billed once each", function(p)
    assert_eq(p:fetch("POST", "/subs/ada").status_code, 202)
    for month = 1, 23 do
        assert_eq(show(p, "ada").generation, month)
        p:advance("30d")
    end
    local s = show(p, "ada")
    assert_eq(s.status, "completed")
    assert_eq(s.generation, 24)
    assert_eq(s.result.months_billed, 24)
    assert_eq(s.result.last, "sub-ada@24/bill/1/1")
    -- The journal keeps the last 10 generations (GENERATIONS_KEPT): one bill in each, and
    -- the months before are reported dropped.
    local bills = 0
    for _, e in ipairs(p:journal("sub-ada")) do
        if e.kind == "step.result" then bills = bills + 1 end
    end
    assert_eq(bills, 10)
    assert_eq(s.earlier, 9)
    assert_eq(s.dropped, 14)
end)

test("the cancel route reaches the run in a later month", function(p)
    p:fetch("POST", "/subs/bo")
    p:advance("30d")
    p:advance("30d")
    assert_eq(show(p, "bo").generation, 3)
    assert_eq(p:fetch("POST", "/subs/bo/cancel").status_code, 202)
    local s = show(p, "bo")
    assert_eq(s.status, "completed")
    assert_eq(s.result, { customer = "bo", months_billed = 3, ended_by = "cancel" })
    assert_eq(s.earlier, 2)
end)

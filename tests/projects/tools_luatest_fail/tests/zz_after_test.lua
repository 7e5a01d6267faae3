-- A file after the broken ones still runs.
test("a file after a broken one runs", function(p)
    assert_eq(p:start("echo", 2, { id = "e-2" }).result, 2)
end)

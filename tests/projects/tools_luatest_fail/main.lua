-- A project whose Lua tests fail on purpose (tests/tools/test_luatest.py). Each failing line
-- in tests/ carries a `-- fails:<what>` marker the Python test finds its line number by.
workflow "echo" (function(wf, input)
    return wf:step("echo", function() return input end)
end)

-- Values at the platform's 256 KiB limit on the AWS path (tests/aws/test_large_values.py).
-- `Count(wf.id):hit(name)` is an object stand-in that counts how often a step body ran.
local Count = objects "Count"

-- The input comes back as the result, through a step: the input, a step result and the
-- run's result, each as large as the input.
workflow "echo" (function(wf, input)
    local out = wf:step("copy", function()
        Count(wf.id):hit("copy")
        return input
    end)
    return out
end)

-- A step result of `n` bytes that is also the run's result.
workflow "big-result" (function(wf, input)
    local out = wf:step("make", function()
        Count(wf.id):hit("make")
        return string.rep("r", input.n)
    end)
    return out
end)

-- Several values at the limit saved in one append: after "go", the step's result, three
-- signals already waiting (each resolved at once by `all`) and the run's result are all
-- recorded together, when the run completes.
workflow "many" (function(wf, input)
    wf:await("go")
    local made = wf:step("make", function()
        Count(wf.id):hit("make")
        return string.rep("m", input.n)
    end)
    wf:all({ "x", "y", "z" })
    return string.rep("t", input.tail) .. #made
end)

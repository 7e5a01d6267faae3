-- Writes whose answer is lost and retried by botocore (tests/aws/test_retried_writes.py).

-- The input comes back through a step: an input over 32 KiB lives in S3.
workflow "echo" (function(wf, input)
    return wf:step("copy", function() return input end)
end)

-- A step result of `n` bytes (over 64 KiB its chunk lives in S3), then a signal to finish.
workflow "big-step" (function(wf, input)
    local out = wf:step("make", function() return string.rep("r", input.n) end)
    wf:await("go")
    return #out
end)

-- The workflow code raises an error of `n` bytes (over 32 KiB it lives in S3).
workflow "big-error" (function(wf, input)
    wf:step("first", function() return true end)
    error(string.rep("e", input.n), 0)
end)

-- Waits with a long timeout (a Scheduler schedule), then the workflow code raises.
workflow "wait-then-raise" (function(wf, input)
    local got = wf:await("go", { timeout = "24h" })
    error("raised after " .. tostring(got and got.n), 0)
end)

-- Started with its signal (signal-with-start): the input comes back once it is paid.
workflow "paid-echo" (function(wf, input)
    local paid = wf:await("paid")
    return { input = input, by = paid.by }
end)

-- A failed run, to resume (tests/aws/test_resume_wake.py).

-- Failed (resumable) after its first step.
workflow "boom" (function(wf, input)
    wf:step("first", function() return 1 end)
    error("boom", 0)
end)

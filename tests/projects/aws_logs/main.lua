-- Log keys on AWS (tests/aws/test_log_keys.py): lines in and between steps of two runs.
workflow "chatty" (function(wf, input)
    log.info("before", { who = input.who })
    wf:step("first", function()
        log.info("in first", { who = input.who })
    end)
    log.info("between", { who = input.who })
    wf:step("second", function()
        log.info("in second", { who = input.who })
    end)
    log.info("after", { who = input.who })
    return true
end)

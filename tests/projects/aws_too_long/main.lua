-- A step asking for more time than one Lambda invocation gives (tests/infra/test_wake_path.py).
workflow "report" (function(wf, input)
    wf:step("quick", { timeout = "14m" }, function() return 1 end)
    wf:step("render", {
        retries = 2,
        timeout = "20m",
    }, function() return 2 end)
    return "done"
end)

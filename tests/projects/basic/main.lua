local greet = workflow "greet" (function(wf, input)
    local a = wf:step("hello", function() return "hello " .. input.name end)
    local paid = wf:await("paid", { timeout = "1h" })
    wf:sleep("10m")
    return { greeting = a, paid = paid, t = os.time() }
end)

-- Timer tests on AWS (tests/aws/test_timers.py): sleeps, backoffs and timeouts of all sizes.

workflow "nap" (function(wf, input)
    wf:sleep(input.sleep)
    wf:step("after", function() return "woke" end)
    return { slept = input.sleep }
end)

workflow "two-naps" (function(wf, input)
    wf:sleep("24h")
    wf:step("between", function() return true end)
    wf:sleep("48h")
    return "rested"
end)

-- The first attempt fails; the retry waits out the 2s backoff.
workflow "flaky" (function(wf, input)
    local got = wf:step("try", { retries = 2, backoff = "2s" }, function()
        if wf.step_id:match("/1$") then error("first attempt fails", 0) end
        return "ok on " .. wf.step_id
    end)
    return got
end)

workflow "approval" (function(wf, input)
    local payload = wf:await("approved", { timeout = "24h" })
    wf:step("record", function() return payload ~= nil end)
    return { approved = payload ~= nil, by = payload and payload.by }
end)

-- Returns straight after the wait: the signal's consumption and the run's end are one write.
workflow "approval-direct" (function(wf, input)
    local payload = wf:await("approved", { timeout = "24h" })
    return { approved = payload ~= nil, by = payload and payload.by }
end)

on "fetch" (function(request)
    local id = request.path:match("^/cancel/(.+)$")
    if request.method == "POST" and id then
        workflows "nap":get(id):cancel()
        return { status_code = 202, body = "" }
    end
    id = request.path:match("^/approve/(.+)$")
    if request.method == "POST" and id then
        local live = workflows "approval":get(id):signal("approved", { by = "ada" })
        return { status_code = live and 202 or 409, body = "" }
    end
    return { status_code = 404, body = "" }
end)

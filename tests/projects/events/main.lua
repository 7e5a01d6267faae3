-- Workflows whose events lunaflow dev should report on its terminal (issue 17, point 2).

workflow "flaky" (function(wf, input)
    wf:step("boom", { retries = 2, backoff = "200ms" }, function()
        error("kaboom-" .. wf.id)
    end)
    return { ok = true }
end)

workflow "good" (function(wf, input)
    wf:step("one", function() return 1 end)
    return { ok = true }
end)

workflow "waiter" (function(wf, input)
    wf:step("first", function() return 1 end)
    local v = wf:await("go")
    return { got = v }
end)

workflow "logger" (function(wf, input)
    log.info("hello-from-run-code", { n = 1 })
    return { ok = true }
end)

workflow "crasher" (function(wf, input)
    wf:step("before", function() return 1 end)
    local t = nil
    return t.field -- CRASH-LINE
end)

workflow "dates" (function(wf, input)
    wf:step("date-step", function()
        return os.date("%Y") -- DATE-LINE
    end)
    return { ok = true }
end)

workflow "markup" (function(wf, input)
    wf:step("[bold]styled", function() error("[/]boom") end)
end)

workflow "typo" (function(wf, input)
    wf:awiat("go") -- TYPO-LINE
end)

on "fetch" (function(request)
    if request.path == "/start" then
        local run = workflows(request.query.wf):start(
            request.body ~= "" and json.parse(request.body) or {}, { id = request.query.id })
        return { status_code = 201, body = run.id }
    end
    if request.path == "/cancel" then
        workflows(request.query.wf):get(request.query.id):cancel()
        return { status_code = 202, body = "cancelled" }
    end
    if request.path == "/echo" then
        return { status_code = 200, headers = { ["content-type"] = "text/plain" }, body = "[" .. request.body .. "]" }
    end
    return { status_code = 404, body = "no route" }
end)

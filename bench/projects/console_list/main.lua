-- bench/console_list.py on `lunaflow dev`: a run of n steps, started over HTTP while console
-- tabs poll the runs list, and "waiter" runs, the parked runs the list is filled with.

local loop = workflow "loop" (function(wf, input)
    local total = 0
    for i = 1, input.n do
        total = total + wf:step("s", function() return i end)
    end
    return { total = total }
end)

workflow "waiter" (function(wf, input)
    return wf:await("go")
end)

on "fetch" (function(request)
    -- POST /start/<id>?n=<steps>  starts a loop run with that id
    local id = request.path:match("^/start/([^/]+)$")
    if request.method == "POST" and id then
        local run = loop:start({ n = tonumber(request.query.n) or 1 }, { id = id })
        return { status_code = 201, body = json.encode({ run = run.id }) }
    end
    return { status_code = 404, body = "no route" }
end)

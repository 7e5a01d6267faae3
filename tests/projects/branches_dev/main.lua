-- tests/dev_server/test_branch_crash.py: a map's branches in a lunaflow dev killed mid-way.
local effects = kv "effects"
local Slow = objects "Slow"

object "Slow" {
    call = function(self, url)
        return http.get(url, { timeout = 10 }).status
    end,
}

-- Each branch's step counts its effect by its step id (the same id across a crash), then
-- makes a slow call, so a kill finds branches in the middle of their steps.
workflow "branch" (function(wf, item)
    return wf:step("work", function()
        local id = wf.step_id
        effects:put(id, (effects:get(id) or 0) + 1)
        Slow("s-" .. item.n):call(item.url)
        return item.n * 10
    end)
end)

workflow "fan" (function(wf, input)
    local items = {}
    for i = 1, input.n do items[i] = { n = i, url = input.url } end
    return wf:map(items, "branch", { limit = input.limit })
end)

on "fetch" (function(req)
    if req.path == "/start" then
        local body = json.parse(req.body)
        local run = workflows(body.workflow):start(body.input, { id = body.id })
        return { status = 200, body = json.encode({ id = run.id }) }
    end
    if req.path == "/effects" then
        return { status = 200, body = json.encode(effects:list({ limit = 100 })) }
    end
    return { status = 404, body = "{}" }
end)

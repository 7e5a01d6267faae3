-- tests/dev_server/test_failures_dev.py: a saga under `lunaflow dev` whose services are a
-- loopback partner reached over HTTP (step body -> object -> http.post), so the test can
-- hold a compensation's call open and SIGKILL the server inside it.
object "Partner" {
    call = function(self, url, what, step_id)
        local r = http.post(url .. "/" .. what .. "/" .. step_id, "", { timeout = 60 })
        if r.status ~= 200 then error("partner answered " .. r.status, 0) end
        return r.body
    end,
}
local Partner = objects "Partner"

workflow "trip" (function(wf, trip)
    local held = {}
    for _, name in ipairs({ "flight", "hotel", "car" }) do
        local ok, failure = pcall(wf.step, wf, "reserve-" .. name, { catch = true }, function()
            if trip.sold_out == name then error({ retry = false, message = "no " .. name .. " left" }) end
            return Partner("p"):call(trip.url, "reserve", wf.step_id)
        end)
        if not ok then
            for i = #held, 1, -1 do
                wf:step("release-" .. held[i], { retries = 3, backoff = "1s" }, function()
                    return Partner("p"):call(trip.url, "release", wf.step_id)
                end)
            end
            return { outcome = "cancelled", failed = failure.step, reason = failure.message }
        end
        held[#held + 1] = name
    end
    return { outcome = "booked" }
end)

-- A step that fails and waits out a long backoff: the console's Retry now cuts it short.
workflow "slow-retry" (function(wf, input)
    return wf:step("flaky", { retries = 2, backoff = "1h" }, function()
        return Partner("p"):call(input.url, "flaky", wf.step_id)
    end)
end)

on "fetch" (function(request)
    local body = json.parse(request.body)
    local run = workflows(body.workflow):start(body.input, { id = body.id })
    return { status_code = 202, body = run.id }
end)

-- Waits for a signal that never comes: a bounded start of it times out.
workflow "waits" (function(wf)
    return wf:await("never")
end)

-- A cleanup on cancel (wf:on_cancel) whose release is held open by the test, which kills
-- the server inside it; the child it started is cancelled once the cleanup is done.
workflow "held-order" (function(wf, order)
    local hold = wf:step("reserve", function() return Partner("p"):call(order.url, "reserve", wf.step_id) end)
    wf:on_cancel(function()
        wf:step("release", { retries = 3, backoff = "1s" }, function()
            return Partner("p"):call(order.url, "release", wf.step_id)
        end)
        wf:step("notify", function() return Partner("p"):call(order.url, "notify", wf.step_id) end)
    end)
    wf:step("spawn", function() return workflows("waits"):start({}, { id = wf.id .. "-child" }).id end)
    wf:await("paid")
    return hold
end)

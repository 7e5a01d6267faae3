-- The AWS runtime at its limits (tests/aws/test_summary.py, test_long_steps.py,
-- test_wakes.py, test_reconcile.py, test_timers.py). `Gate(wf.id):pass(name)` is an object
-- stand-in: a test decides what it does (count, block, kill the process).
local Gate = objects "Gate"

workflow "approval" (function(wf, input)
    local payload = wf:await("go", { timeout = "24h" })
    return { got = payload }
end)

-- One step through the gate, then a wait.
workflow "hold" (function(wf, input)
    local got = wf:step("held", function()
        return Gate(wf.id):pass("held", wf.step_id)
    end)
    local payload = wf:await("go", { timeout = "24h" })
    return { got = got, payload = payload }
end)

-- A step with no timeout that spends `input.spin` seconds of CPU.
workflow "unbounded" (function(wf, input)
    local out = wf:step("spin", function()
        local start = os.clock()
        while os.clock() - start < input.spin do end
        return "spun"
    end)
    return out
end)

-- A step whose timeout comes from the input (the deploy-time check cannot see it).
workflow "bounded" (function(wf, input)
    return wf:step("timed", { timeout = input.timeout }, function()
        return Gate(wf.id):pass("timed", wf.step_id)
    end)
end)

workflow "nap" (function(wf, input)
    wf:sleep(input.sleep)
    wf:step("after", function() return Gate(wf.id):pass("after", wf.step_id) end)
    return "rested"
end)

-- A timer, then a new generation whose step waits on the gate (tests/aws/test_timer_wakes.py).
workflow "napcontinue" (function(wf, input)
    if not input.again then
        wf:sleep("5m")
        return wf:continue_as_new({ again = true })
    end
    return wf:step("after", function() return Gate(wf.id):pass("after", wf.step_id) end)
end)

-- A long timer, then (after "x") a short one.
workflow "switch" (function(wf, input)
    wf:await("x", { timeout = "1h" })
    local y = wf:await("y", { timeout = "10s" })
    return { y = y }
end)

-- A real object whose call can be cut off mid-way: `mark` tells the Gate the call began.
object "Slow" {
    spin = function(self, id)
        self.state.spins = (self.state.spins or 0) + 1
        Gate(id):pass("spinning", id .. "/spin")
        local start = os.clock()
        while os.clock() - start < 20 do end
        return "spun"
    end,
    count = function(self)
        return self.state.spins or 0
    end,
}

workflow "spinner" (function(wf, input)
    return wf:step("spin", function() return objects "Slow"("key"):spin(wf.id) end)
end)

-- A route that starts a run: the fetch function hands it to the worker.
on "fetch" (function(request)
    local id = request.path:match("^/hold/(.+)$")
    if request.method == "POST" and id then
        workflows "hold":start({}, { id = id })
        return { status_code = 202, body = id }
    end
    if request.method == "GET" and request.path == "/slow" then
        return { status_code = 200, body = tostring(objects "Slow"("key"):count()) }
    end
    return { status_code = 404, body = "" }
end)

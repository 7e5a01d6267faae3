-- The crash torture project (bench/torture.py, tests/races/). Every step body first
-- reports wf.step_id to the Ledger object, which posts it to a ledger server outside
-- lunaflow (the driver's, on loopback): that is the effect the invariant checker counts.
-- Results depend only on inputs, step attempts and signal payloads, so the driver can
-- compute each run's expected result on its own.

object "Ledger" {
    -- Record one body run: POST the step id to the ledger (at `path`, "/effect" unless the
    -- body asks to be killed); it answers 200 once the entry is on disk.
    record = function(self, url, step_id, path)
        local r = http.post(url .. (path or "/effect"), step_id, { timeout = "20s" })
        if r.status ~= 200 then
            error("the ledger refused " .. step_id .. " with status " .. tostring(r.status), 0)
        end
        return true
    end,
}

on "fetch" (function(request)
    local q = request.body ~= "" and json.parse(request.body) or {}
    if request.method == "POST" and request.path == "/t/start" then
        local run = workflows(q.workflow):start(q.input, { id = q.id })
        return { status_code = 200, body = json.encode({ id = run.id }) }
    end
    if request.method == "POST" and request.path == "/t/signal" then
        local live = workflows(q.workflow):get(q.id):signal(q.name, q.payload)
        return { status_code = 200, body = json.encode({ live = live }) }
    end
    if request.method == "POST" and request.path == "/t/hoard" then
        -- A memory-hungry handler: fill this Lua state to its limit and keep the hoard where
        -- the state's next calls see it. The platform must rebuild the state, not die.
        local hoard, chunk = {}, string.rep("h", 64 * 1024)
        pcall(function()
            while true do hoard[#hoard + 1] = chunk .. #hoard end
        end)
        -- Room for the answer: what the failed allocation left depends on where the limit fell
        -- among the chunks (a byte more of prelude moves it), so two chunks are let go; Lua's
        -- emergency collection frees them when the answer needs the room. The state stays
        -- within a sixteenth of its limit, so it is still replaced after this call.
        hoard[#hoard] = nil
        hoard[#hoard] = nil
        string.HOARD = hoard
        return { status_code = 200, body = json.encode({ chunks = #hoard }) }
    end
    if request.method == "GET" and request.path == "/t/run" then
        local run = workflows(request.query.workflow):get(request.query.id)
        return { status_code = 200, body = json.encode({ status = run:status(), result = run:result() }) }
    end
    return { status_code = 404, body = "no route " .. request.method .. " " .. request.path }
end)

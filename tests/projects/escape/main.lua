-- The escape corpus driver (tests/reliability_security/test_escape_corpus.py).
--
-- Each file in cases/ is one hostile chunk. The test hands a chunk's source to the context
-- the case names and the chunk runs there, called as chunk(context, services):
--   run     inside the workflow function          context = wf
--   step    inside a step body                    context = wf
--   fetch   inside the fetch handler              context = request
--   response  as fetch, and what it returns is the response itself
--   object  inside an object method               context = self
--   queue   inside a queue handler                context = message
-- (a case for a script's top level is deployed as a script of its own instead).
-- What a chunk returns is recorded: a run's or step's result, or a "case result" log line.
-- "ok" and GET /ok are the normal work that must still succeed after every case; they use
-- nothing a case can tamper with.

local db = database "main" { migrations = "migrations/main" }
local Case = objects "Case"
local cases = queue "cases"

local services = {
    db = db,
    kv = kv "cases",
    notes = queue "notes",
    Case = Case,
    victim = workflows "case-run",
    ok = workflows "ok",
}

local function chunk(c)
    local f, err = load(c.src, "@cases/" .. c.name .. ".lua")
    if not f then error("case " .. c.name .. " does not compile: " .. tostring(err), 0) end
    return f
end

workflow "ok" (function(wf)
    return wf:step("one", function() return 1 end)
end)

workflow "case-run" (function(wf, c)
    return chunk(c)(wf, services)
end)

workflow "case-step" (function(wf, c)
    return wf:step("case", function() return chunk(c)(wf, services) end)
end)

object "Case" {
    run = function(self, c) return chunk(c)(self, services) end,
}

on "queue" ("cases", function(message)
    local result = chunk(message.body)(message, services)
    log.info("case result", { case = message.body.name, value = result })
end)

local function respond(name, result)
    log.info("case result", { case = name, value = result })
    local body = result
    if type(result) ~= "string" then body = json.encode(result) end
    return { status_code = 200, headers = { ["content-type"] = "text/plain" }, body = body }
end

on "fetch" (function(request)
    local path, name = request.path, request.query.name
    if path == "/ok" then
        return { status_code = 200, headers = { ["content-type"] = "text/plain" }, body = "ok" }
    end
    local c = { name = name, src = request.body }
    if path == "/case/fetch" then
        return respond(name, chunk(c)(request, services))
    elseif path == "/case/response" then
        return chunk(c)(request, services)
    elseif path == "/case/object" then
        return respond(name, Case(name):run(c))
    elseif path == "/case/queue" then
        cases:send(c)
        return { status_code = 202, body = "queued" }
    elseif path == "/case/run" or path == "/case/step" then
        local wfname = path == "/case/run" and "case-run" or "case-step"
        workflows(wfname):start(c, { id = request.query.id })
        return { status_code = 202, body = "started" }
    elseif path == "/status" then
        return { status_code = 200, body = workflows(request.query.workflow):get(request.query.id):status() }
    end
    return { status_code = 404, body = "no route " .. path }
end)

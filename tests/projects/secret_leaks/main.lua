-- Where a secret's value could leak (tests/aws/test_secret_redaction.py): an outbound URL
-- carrying it in the query string, errors and log lines that quote it, in steps, in the
-- workflow function, in the fetch handler and in a queue handler.
object "Api" {
    get = function(self, base)
        local r = http.get(base .. "/v1/items?api_key=" .. secret "api-key", { timeout = "5s" })
        return r.status
    end,
    get_as_user = function(self, host)
        local r = http.get("http://ada:" .. secret "api-key" .. "@" .. host .. "/v1/items", { timeout = "5s" })
        return r.status
    end,
}
local Api = objects "Api"

workflow "call-api" (function(wf, input)
    wf:step("call", function()
        if input.as_user then return Api("desk"):get_as_user(input.host) end
        return Api("desk"):get(input.base)
    end)
end)

workflow "say-it" (function(wf, input)
    wf:step("say", { retries = 2, backoff = "1s" }, function()
        local k = secret "api-key"
        log.warn("using key " .. k, { key = k, nested = { k, { deeper = "x" .. k .. "x" } } })
        error("refused with " .. k, 0)
    end)
end)

workflow "raise-it" (function(wf, input)
    local k = secret "api-key"
    log.info("workflow holds " .. k, {})
    error("the workflow function raised holding " .. k, 0)
end)

on "fetch" (function(request)
    if request.path == "/start" then
        local a = json.parse(request.body)
        workflows(a.workflow):start(a.input, { id = a.id })
        return { status_code = 202, body = "" }
    end
    if request.path == "/boom" then
        error("the handler saw " .. secret "api-key", 0)
    end
    return { status_code = 404, body = "" }
end)

on "queue" ("orders", function(message)
    error("the queue handler saw " .. secret "api-key", 0)
end)

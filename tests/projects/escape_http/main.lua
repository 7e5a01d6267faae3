-- The dev server's HTTP layer under arbitrary requests (tests/reliability_security/test_properties.py):
-- every request reaching the handler is described back, so the request table's shape is
-- exercised too.
on "fetch" (function(request)
    if request.path == "/ok" then
        return { status_code = 200, headers = { ["content-type"] = "text/plain" }, body = "ok" }
    end
    if request.path:sub(1, 5) == "/boom" then error("boom at " .. request.path) end
    local headers, query = 0, 0
    for name, value in pairs(request.headers) do
        assert(type(name) == "string" and type(value) == "string")
        headers = headers + 1
    end
    for _ in pairs(request.query) do query = query + 1 end
    return {
        status_code = 200,
        headers = { ["content-type"] = "application/json" },
        body = json.encode({
            method = request.method, path = request.path, headers = headers, query = query,
            body = #request.body,
        }),
    }
end)

-- Fetch handler tests on AWS (tests/aws/test_handlers_fetch.py): echo what the handler saw.
on "fetch" (function(request)
    if request.path == "/boom" then
        error("the handler broke on purpose", 0)
    end
    if request.path == "/not-a-response" then
        return 42
    end
    if request.path == "/secret" then
        return { status_code = 200, body = secret "api-key" }
    end
    if request.path == "/size" then
        return { status_code = 200, body = tostring(#request.body) }
    end
    return {
        status_code = 200,
        headers = { ["content-type"] = "application/json", ["x-seen-method"] = request.method },
        body = json.encode({
            method = request.method,
            path = request.path,
            query = request.query,
            headers = request.headers,
            body = request.body,
        }),
    }
end)

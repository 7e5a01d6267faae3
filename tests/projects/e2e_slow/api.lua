-- A route that waits on a slow upstream (the test's own loopback server), so a test can
-- see whether several requests progress at once or queue behind each other.
on "fetch" (function(request)
    if request.method == "GET" and request.path == "/slow" then
        local started = os.time()
        local upstream = http.get(request.query.upstream, { timeout = "10s" })
        return {
            status_code = 200,
            headers = { ["content-type"] = "application/json" },
            body = json.encode({ upstream = upstream.status, tag = request.query.tag, started = started }),
        }
    end
    return { status_code = 404, body = "no route" }
end)

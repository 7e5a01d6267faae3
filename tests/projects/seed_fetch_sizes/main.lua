-- Fetch sizes for tests/semantics/test_fetch_sizes.py and tests/dev_server/test_fetch_sizes.py:
-- GET /body?copies=N&char=C answers N copies of C; POST /echo answers the body's length.
on "fetch" (function(request)
    if request.path == "/body" then
        local n = math.tointeger(tonumber(request.query.copies)) or 0
        return { status_code = 200, body = string.rep(request.query.char or "x", n) }
    end
    if request.path == "/echo" then
        return { status_code = 200, body = tostring(#request.body) }
    end
    return { status_code = 404, body = "" }
end)

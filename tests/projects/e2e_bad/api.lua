-- Routes that misbehave in every way a fetch handler can, and one that works.
local function fail_here()
    error("boom")
end

on "fetch" (function(request)
    local path = request.path
    if path == "/ok" then
        return { status_code = 200, headers = { ["content-type"] = "text/plain" }, body = "ok" }
    end
    if path == "/error" then
        fail_here()
    end
    if path == "/loop" then
        local n = 0
        while true do n = n + 1 end
    end
    if path == "/bomb" then
        local hoard = {}
        local i = 0
        while true do
            i = i + 1
            hoard[i] = string.rep("x", 1024) .. i
        end
    end
    if path == "/number" then
        return 42
    end
    if path == "/bad-status" then
        return { status_code = 42, body = "not a status" }
    end
    return {
        status_code = 404,
        headers = { ["content-type"] = "application/json" },
        body = json.encode({ error = "e2e_bad has no route " .. path }),
    }
end)

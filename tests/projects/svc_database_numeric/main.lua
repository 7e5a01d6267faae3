-- Migration prefixes of different widths: 9_ comes before 10_ in number order.
local nums = database "nums" { migrations = "migrations/nums" }

on "fetch" (function(request)
    local rows = nums:query("SELECT file FROM applied_order ORDER BY n")
    return { status_code = 200, body = json.encode({ ok = true, value = rows }) }
end)

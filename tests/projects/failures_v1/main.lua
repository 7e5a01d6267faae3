-- tests/semantics/test_failures.py, versioning: the code before `catch` was added.
local Attempt = objects "Attempt"

workflow "order" (function(wf)
    wf:await("go")
    local n = wf:step("charge", { retries = 2, backoff = "1s" }, function()
        local a = Attempt(wf.id):try("charge")
        if not a.ok then error("boom " .. a.n, 0) end
        return a.n
    end)
    return { outcome = "charged", on = n }
end)

-- tests/semantics/test_failures.py, versioning: `catch` added under runs in flight, guarded
-- by wf:version so runs started before it keep parking failed, and new runs compensate.
local Attempt = objects "Attempt"

workflow "order" (function(wf)
    wf:await("go")
    local catch = wf:version("catch-charge")
    local ok, n = pcall(wf.step, wf, "charge", { retries = 2, backoff = "1s", catch = catch }, function()
        local a = Attempt(wf.id):try("charge")
        if not a.ok then error("boom " .. a.n, 0) end
        return a.n
    end)
    if not ok then
        wf:step("refund", function() return Attempt(wf.id):try("refund").n end)
        wf:await("ack")
        return { outcome = "refunded" }
    end
    return { outcome = "charged", on = n }
end)

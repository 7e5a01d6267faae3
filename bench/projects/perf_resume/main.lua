-- bench/scaling.py's resume curve: n steps, then two waits. Parked at the first wait, the
-- journal holds 1 + 2n + 1 entries (run.started, an intent and a result per step, the wait).
-- Signal "go" from a fresh process is the cold resume (a replay through every entry); the
-- run then parks at "go2" with its coroutine cached, and signal "go2" is the warm wake.

workflow "parked" (function(wf, input)
    local total = 0
    for i = 1, input.n do
        total = total + wf:step("s", function() return i end)
    end
    local go = wf:await("go")
    local go2 = wf:await("go2")
    return { total = total, go = go, go2 = go2 }
end)

-- Lease and race tests (tests/aws_races/). Every step body writes to the Ledger object
-- before it returns, so how often a body ran is visible outside the journal.

object "Ledger" {
    -- Count one body run for this step id; returns the count so far.
    ran = function(self, step_id)
        local runs = self.state.runs or {}
        runs[step_id] = (runs[step_id] or 0) + 1
        self.state.runs = runs
        return runs[step_id]
    end,
    runs = function(self) return self.state.runs or {} end,
}

local Ledger = objects "Ledger"

local function attempt_of(step_id)
    return tonumber(step_id:match("/(%d+)$"))
end

-- One step, then a wait for "go": parks once; on the signal, one more step and the end.
workflow "once" (function(wf, input)
    local a = wf:step("first", function()
        Ledger(wf.id):ran(wf.step_id)
        return input.x * 2
    end)
    local go = wf:await("go")
    local b = wf:step("after", function()
        Ledger(wf.id):ran(wf.step_id)
        return go.k
    end)
    return { a = a, b = b }
end)

-- Returns straight after its wait: consuming the signal and ending are one write.
workflow "ends_on_signal" (function(wf, input)
    local go = wf:await("go")
    return { go = go }
end)

-- The race workload: n steps, a step whose first attempt fails (a short backoff), a
-- signal, a short sleep and a last step. The result says what every step returned.
workflow "chain" (function(wf, input)
    local total = 0
    for i = 1, input.n do
        total = total + wf:step("add", function()
            Ledger(wf.id):ran(wf.step_id)
            return i
        end)
    end
    local flaky = wf:step("flaky", { retries = 3, backoff = "20ms" }, function()
        Ledger(wf.id):ran(wf.step_id)
        if attempt_of(wf.step_id) == 1 then error("the first attempt fails", 0) end
        return "ok after " .. attempt_of(wf.step_id)
    end)
    local go = wf:await("go")
    wf:sleep("30ms")
    local last = wf:step("last", function()
        Ledger(wf.id):ran(wf.step_id)
        return go.k
    end)
    return { total = total, flaky = flaky, last = last }
end)

-- A step that always fails, once per attempt: the run parks as failed; resume runs it again.
workflow "fails" (function(wf, input)
    wf:step("doomed", function()
        Ledger(wf.id):ran(wf.step_id)
        error("doomed", 0)
    end)
end)

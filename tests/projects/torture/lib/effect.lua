-- The effect every step body performs first: report wf.step_id to the Ledger object.
-- Returns the attempt number from the step id (<run id>/<step name>/<pass>/<attempt>).
-- With `kill_on`, that attempt asks the ledger to end the process running it (a SIGKILL)
-- before it answers: a body that always ends its process.
local Ledger = objects "Ledger"

return function(wf, input, kill_on)
    local id = wf.step_id
    local attempt = tonumber(id:match("/(%d+)$"))
    Ledger(id):record(input.ledger, id, attempt == kill_on and "/effect/kill" or "/effect")
    return attempt
end

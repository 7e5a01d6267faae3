-- The effect every step body performs first: report wf.step_id to the Ledger object.
-- Returns the attempt number from the step id (<run id>/<step name>/<pass>/<attempt>).
local Ledger = objects "Ledger"

return function(wf, input)
    local id = wf.step_id
    Ledger(id):record(input.ledger, id)
    return tonumber(id:match("/(%d+)$"))
end

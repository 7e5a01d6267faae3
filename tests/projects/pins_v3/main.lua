-- Version 3 keeps version 1's path (the rename behind wf:version): every run replays here.
workflow "order" (function(wf, input)
    local name = wf:version("stock-step") and "reserve-stock" or "reserve"
    local reserved = wf:step(name, function() return "reserved by v3" end)
    local paid = wf:await("paid", { timeout = "72h" })
    local shipped = wf:step("ship", function() return "shipped by v3" end)
    return { reserved = reserved, paid = paid ~= nil, shipped = shipped }
end)

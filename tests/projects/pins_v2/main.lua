-- Version 2 renames a step: runs past it in version 1 cannot replay here.
workflow "order" (function(wf, input)
    local reserved = wf:step("reserve-stock", function() return "reserved by v2" end)
    local paid = wf:await("paid", { timeout = "72h" })
    local shipped = wf:step("ship", function() return "shipped by v2" end)
    return { reserved = reserved, paid = paid ~= nil, shipped = shipped }
end)

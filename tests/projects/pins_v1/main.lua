-- tests/semantics/test_pins.py: version 1 of an order workflow.
workflow "order" (function(wf, input)
    local reserved = wf:step("reserve", function() return "reserved by v1" end)
    local paid = wf:await("paid", { timeout = "72h" })
    local shipped = wf:step("ship", function() return "shipped by v1" end)
    return { reserved = reserved, paid = paid ~= nil, shipped = shipped }
end)

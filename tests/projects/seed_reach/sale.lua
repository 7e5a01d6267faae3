-- tests/seed/test_gotchas.py: the one script that declares "settle-sale".
workflow "settle-sale" (function(wf, sale)
    local paid = wf:await("paid")
    return { outcome = "settled", by = paid.by, lot = sale.id }
end)

-- tests/seed/test_gotchas.py: this script and other.lua both declare "settle-sale".
workflow "settle-sale" (function(wf, sale)
    return { outcome = "settled" }
end)

-- tests/seed/test_gotchas.py: a second script publishing the same workflow name.
workflow "settle-sale" (function(wf, sale)
    return { outcome = "other" }
end)

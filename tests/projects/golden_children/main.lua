-- The golden journal of child runs (issue 27.1): tests/golden/make_golden.py records it.

workflow "quick" (function(wf, input)
    return { quick = input.sku }
end)

workflow "slow" (function(wf, input)
    wf:sleep("1s")
    return { slow = input.qty }
end)

workflow "order" (function(wf, input)
    local first = wf:child("quick", input):result()
    local second = wf:child("slow", input, { id = wf.id .. "-slow" }):result({ timeout = "1h" })
    return { first = first, second = second }
end)

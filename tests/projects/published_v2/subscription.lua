-- v2 publishes the month from 0: runs journaled under v1 diverge at their wf:set.
workflow "subscription" (function(wf, input)
  wf:set("plan", input.plan)
  for month = 1, input.months do
    wf:set("month", month - 1)
    wf:await("renewed", { timeout = "30d" })
  end
  return "ended"
end)

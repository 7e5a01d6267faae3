-- A daily tick for tests/dev_server/test_schedule_crash.py: at start-up lunaflow dev fires
-- today's (the latest of the last 24 hours) once.
workflow "report" (function(wf, input)
  local n = wf:step("count", function() return input.n end)
  return n
end)

schedule "daily" { every = "1d", workflow = "report", input = { n = 7 } }

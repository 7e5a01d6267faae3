-- Schedules for tests/semantics/test_schedules.py.
workflow "report" (function(wf, input)
  if input and input.hold then wf:sleep(input.hold) end
  return { input = input, at = os.time() }
end)

schedule "nightly" { cron = "0 3 * * *", timezone = "Europe/Paris", workflow = "report", input = { kind = "nightly" } }
schedule "quarter" { every = "15m", workflow = "report", start_at = "2026-01-01T00:00:00Z", end_at = "2026-01-01T01:00:00Z" }
schedule "slow-skip" { every = "1h", workflow = "report", input = { hold = "90m" }, start_at = "2026-01-01T00:00:00Z", end_at = "2026-01-01T03:00:00Z" }
schedule "slow-cancel" { every = "1h", workflow = "report", input = { hold = "90m" }, overlap = "cancel", start_at = "2026-01-01T00:00:00Z", end_at = "2026-01-01T03:00:00Z" }
schedule "slow-allow" { every = "1h", workflow = "report", input = { hold = "90m" }, overlap = "allow", start_at = "2026-01-01T00:00:00Z", end_at = "2026-01-01T03:00:00Z" }

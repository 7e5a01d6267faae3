-- A project with two schedules, synthesized by tests/infra/test_schedules.py.
workflow "report" (function(wf, input) return input end)

schedule "nightly-report" {
  cron = "0 3 * * *", timezone = "Europe/Paris", workflow = "report", input = { kind = "nightly" },
}
schedule "often" { every = "15m", workflow = "report", start_at = "2026-12-01T00:00:00Z" }
schedule "weekdays" { cron = "*/20 9-17 * * MON-FRI", workflow = "report" }

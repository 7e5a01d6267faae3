-- A nightly report of the sales nobody has paid yet. The schedule starts one run a night,
-- at 03:00 in Paris, named for its tick (unpaid-report@2026-01-02T02:00:00Z), so a tick
-- delivered twice joins its run. The figures are published with wf:set: the console shows
-- them on the run's page, and `lunaflow runs --where unpaid>=1` finds the nights that had
-- some, without replaying a run.
local sales = database "sales" { migrations = "migrations/sales" }

workflow "unpaid-report" (function(wf)
    local unpaid = wf:step("count", function()
        return sales:first(
            "SELECT count(*) AS sales, coalesce(sum(price), 0) AS total FROM sales WHERE state = 'open'")
    end)
    wf:set("unpaid", unpaid.sales)
    wf:set("unpaid_total", unpaid.total)
    return unpaid
end)

schedule "unpaid-report" { cron = "0 3 * * *", timezone = "Europe/Paris", workflow = "unpaid-report" }

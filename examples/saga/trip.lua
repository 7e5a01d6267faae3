-- Booking a trip is a saga: reserve a flight, a hotel and a car, one step each, in a loop.
-- A reservation that fails for good (out of attempts, or an answer no retry changes) is
-- raised into the workflow (catch = true) instead of parking the run, and the workflow
-- compensates: it releases what it already holds, newest first, each release a step of
-- its own, retried with a capped backoff until the service takes it.
local SERVICES = {
    { name = "flight", api = objects "Flights" },
    { name = "hotel", api = objects "Hotels" },
    { name = "car", api = objects "Cars" },
}

local RESERVE = { retries = 3, backoff = "1s", catch = true }
local RELEASE = { retries = 20, backoff = "1s", max_backoff = "5m", jitter = 0.2 }

local function release_all(wf, held)
    for i = #held, 1, -1 do
        local h = held[i]
        wf:step("release-" .. h.name, RELEASE, function()
            return h.api("desk"):release(h.ref)
        end)
    end
end

workflow "book-trip" (function(wf, trip)
    local held = {}
    for _, s in ipairs(SERVICES) do
        local ok, ref = pcall(wf.step, wf, "reserve-" .. s.name, RESERVE, function()
            local answer = s.api("desk"):reserve(trip, wf.step_id)
            if not answer.ok then error({ retry = false, message = answer.reason }) end
            return answer.ref
        end)
        if not ok then
            local failure = ref
            -- Only a step's raised failure is compensated; any other error is a bug: re-raise it.
            if type(failure) ~= "table" or failure.step == nil then error(failure, 0) end
            release_all(wf, held)
            return {
                outcome = "cancelled",
                failed = failure.step,
                reason = failure.message,
                attempts = failure.attempts,
                released = #held,
            }
        end
        held[#held + 1] = { name = s.name, api = s.api, ref = ref }
    end
    return { outcome = "booked", flight = held[1].ref, hotel = held[2].ref, car = held[3].ref }
end)

-- The saga's own tests: `lunaflow test examples/saga`.

local function book(p, trip)
    local r = p:fetch("POST", "/api/trips", { body = json.encode(trip) })
    assert_eq(r.status_code, 202, "booking " .. trip.id)
    return json.parse(p:fetch("GET", "/api/trips/" .. trip.id).body)
end

local function holds(p)
    return json.parse(p:fetch("GET", "/api/holds").body)
end

test("a trip every service can serve is booked", function(p)
    local trip = book(p, { id = "t1" })
    assert_eq(trip.status, "completed")
    assert_eq(trip.result.outcome, "booked")
    assert_eq(holds(p).car["trip-t1/reserve-car/1/1"].state, "held")
end)

test("a sold-out car releases the hotel, then the flight", function(p)
    local trip = book(p, { id = "t2", sold_out = "car" })
    assert_eq(trip.result, {
        outcome = "cancelled", failed = "reserve-car", reason = "no car left for trip t2",
        attempts = 1, released = 2,
    })
    local h = holds(p)
    assert_eq(h.flight["trip-t2/reserve-flight/1/1"].state, "released")
    assert_eq(h.hotel["trip-t2/reserve-hotel/1/1"].state, "released")
    -- newest first: the hotel's release is journaled before the flight's
    local order = {}
    for _, e in ipairs(p:journal("trip-t2")) do
        if e.kind == "step.result" and string.sub(e.name, 1, 8) == "release-" then order[#order + 1] = e.name end
    end
    assert_eq(order, { "release-hotel", "release-flight" })
end)

test("a sold-out flight is tried once: its error says retry = false", function(p)
    local tries = 0
    p:stub_object("Flights", "reserve", function(key, trip, step_id)
        tries = tries + 1
        return { ok = false, reason = "no flight left" }
    end)
    local trip = book(p, { id = "t3" })
    assert_eq(tries, 1)
    assert_eq(trip.result.failed, "reserve-flight")
    assert_eq(trip.result.released, 0)
end)

test("a release the hotel refuses at first is retried until it holds", function(p)
    local calls = 0
    p:stub_object("Hotels", "release", function(key, ref)
        calls = calls + 1
        if calls < 3 then error("hotel desk unavailable") end
        return true
    end)
    local trip = book(p, { id = "t4", sold_out = "car" })
    assert_eq(trip.status, "sleeping", "waiting out the release's backoff")
    p:advance("1m")
    trip = json.parse(p:fetch("GET", "/api/trips/t4").body)
    assert_eq(trip.result.outcome, "cancelled")
    assert_eq(calls, 3)
end)

-- The trip desk's routes.
--   POST /api/trips { id, sold_out = "car" }  book (run "trip-<id>"; a retried POST joins it)
--   GET  /api/trips/<id>                       the run's status and result
--   GET  /api/holds                            every service's holds, by step id
local book = workflows "book-trip"
local Flights, Hotels, Cars = objects "Flights", objects "Hotels", objects "Cars"

local function answer(status, value)
    return { status_code = status, headers = { ["content-type"] = "application/json" }, body = json.encode(value) }
end

on "fetch" (function(request)
    if request.method == "POST" and request.path == "/api/trips" then
        local trip = json.parse(request.body)
        if type(trip) ~= "table" or type(trip.id) ~= "string" or trip.id == "" then
            return answer(400, { error = "a trip needs an id" })
        end
        local run = book:start(trip, { id = "trip-" .. trip.id })
        return answer(202, { run = run.id })
    end
    local id = request.method == "GET" and string.match(request.path, "^/api/trips/([^/]+)$")
    if id then
        local run = book:get("trip-" .. id)
        local ok, status = pcall(run.status, run)
        if not ok then return answer(404, { error = "no trip " .. id }) end
        return answer(200, { status = status, result = run:result() })
    end
    if request.method == "GET" and request.path == "/api/holds" then
        return answer(200, { flight = Flights("desk"):holds(), hotel = Hotels("desk"):holds(), car = Cars("desk"):holds() })
    end
    return answer(404, { error = "no route" })
end)

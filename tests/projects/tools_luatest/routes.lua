-- Routes: GET /weather?city=X answers what the Weather object got from http.
local Weather = objects "Weather"
local Counter = objects "Counter"

on "fetch" (function(request)
    if request.method == "GET" and request.path == "/weather" then
        local w = Weather(request.query.city):today()
        return { status_code = w.status, body = w.body }
    end
    if request.method == "POST" and request.path == "/count" then
        return { status_code = 200, body = json.encode({ n = Counter(request.body):bump() }) }
    end
    return { status_code = 404, body = "no route" }
end)

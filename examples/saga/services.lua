-- The three services a trip is booked with: a flight, a hotel and a car. Each keeps its
-- holds in its object's state, keyed by the step id that made them, so a reservation
-- repeated after a crash (the same step id) is recognised instead of held twice.
-- A service that cannot serve a trip answers { ok = false, reason = ... }: that will not
-- change on a retry, and trip.lua says so with error({ retry = false, ... }).
local function service(kind)
    return {
        reserve = function(self, trip, step_id)
            if trip.sold_out == kind then
                return { ok = false, reason = "no " .. kind .. " left for trip " .. trip.id }
            end
            local holds = self.state.holds or {}
            holds[step_id] = holds[step_id] or { trip = trip.id, state = "held" }
            self.state.holds = holds
            return { ok = true, ref = step_id }
        end,
        release = function(self, ref)
            local hold = (self.state.holds or {})[ref]
            if hold == nil then return false end
            hold.state = "released"
            return true
        end,
        holds = function(self)
            return self.state.holds or {}
        end,
    }
end

object "Flights" (service("flight"))
object "Hotels" (service("hotel"))
object "Cars" (service("car"))

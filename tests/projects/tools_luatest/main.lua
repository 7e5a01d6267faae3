-- A project for `lunaflow test` (tests/tools/test_luatest.py): one workflow per feature of
-- the test platform `p`.
object "Counter" {
    bump = function(self)
        self.state.n = (self.state.n or 0) + 1
        return self.state.n
    end,
}

object "Weather" {
    today = function(self)
        local r = http.get("https://weather.example/today?city=" .. self.key)
        return { status = r.status, body = r.body }
    end,
}

local Counter = objects "Counter"
local Weather = objects "Weather"

-- Sleeps, then reads the (fake) clock in a step.
workflow "nap" (function(wf, input)
    wf:step("before", function() return os.time() end)
    wf:sleep(input.sleep)
    local woke = wf:step("after", function() return os.time() end)
    return { woke = woke }
end)

-- Waits a day for approval.
workflow "approval" (function(wf, order)
    local approval = wf:await("approved", { timeout = "24h" })
    return { approved = approval ~= nil, by = approval and approval.by }
end)

-- Counts calls to Counter(key); fails while the count is below input.need, so a resume
-- (another call) can make it pass.
workflow "count" (function(wf, input)
    local n = wf:step("bump", function()
        local n = Counter(input.key):bump()
        if n < (input.need or 1) then error("count " .. n .. " is below " .. input.need) end
        return n
    end)
    return n
end)

-- Asks the Weather object, which calls http.
workflow "forecast" (function(wf, input)
    return wf:step("ask", function() return Weather(input.city):today() end)
end)

-- The clock a fresh run sees.
workflow "clock" (function(wf)
    return wf:step("read", function() return os.time() end)
end)

object "Mailer" {
    send = function(self, to, mail)
        self.state.sent = (self.state.sent or 0) + 1
        return "real:" .. to
    end,
}
local Mailer = objects "Mailer"

-- Sends a mail through the Mailer object, from a step.
workflow "mail" (function(wf, input)
    return wf:step("send", function() return Mailer("desk"):send(input.to, { subject = input.subject }) end)
end)

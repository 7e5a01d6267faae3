-- This file raises while it loads: its tests never run.
test("never runs either", function(p) end)
local settings = nil
local port = settings.port -- fails:load_raises

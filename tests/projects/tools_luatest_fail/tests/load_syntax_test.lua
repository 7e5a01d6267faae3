-- This file does not parse: its tests never run.
test("never runs", function(p)
    local x = = 1 -- fails:syntax
end)

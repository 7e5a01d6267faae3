workflow "w" (function(wf)
    wf:step("a", function() return 1 end)
    wf:await("go")
    if wf:version("new-ending") then
        return wf:step("new", function() return "new" end)
    end
    return wf:step("old", function() return "old" end)
end)

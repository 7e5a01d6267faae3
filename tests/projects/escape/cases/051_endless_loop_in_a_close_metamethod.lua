-- escape: loop forever in a to-be-closed variable's __close, which runs while the handler
-- unwinds (even after the budget's own error).
-- where: fetch
-- expect: error ran past its budget of 2000000 Lua instructions
do
    local guard <close> = setmetatable({}, { __close = function() while true do end end })
    while true do end
end

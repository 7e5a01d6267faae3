-- escape: sabotage the library tables every script shares (string, table, json, coroutine,
-- math, os, log) hoping the engine relies on them to encode results, resume runs or log.
-- where: step
-- expect: result "tampered"
local function boom() error("hijacked", 0) end
for _, lib in ipairs({ string, table, json, coroutine, math, os, utf8, uuid }) do
    local keys = {}
    for k in pairs(lib) do keys[#keys + 1] = k end
    for _, k in ipairs(keys) do lib[k] = boom end
    -- json and uuid are platform tables, whose metatables are protected: only their fields
    -- can be replaced (tests/sandbox/test_platform_metatables.py checks the refusal).
    pcall(setmetatable, lib, { __index = boom, __newindex = boom })
end
return "tampered"

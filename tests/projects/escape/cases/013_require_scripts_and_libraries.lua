-- escape: require a top-level script (to run its top level again) and the standard
-- libraries the sandbox leaves out (package, debug, os as a module, lupa's python).
-- where: fetch
-- expect: result [true, true, true, true, true]
local out = {}
for _, name in ipairs({ "main", "package", "debug", "os", "python" }) do
    local ok, err = pcall(require, name)
    out[#out + 1] = not ok and tostring(err):find("no module " .. name .. ".lua in this project", 1, true) ~= nil
end
return out

-- escape: require files outside the project with absolute paths, parent folders, Windows
-- paths, hidden folders, NUL bytes and empty names.
-- where: step
-- expect: result 8
local refused = 0
for _, name in ipairs({ "/etc/passwd", "..", "lib/../../x", "C:\\Windows\\win", ".hidden.x",
    "x\0y", "", "a..b" }) do
    local ok, err = pcall(require, name)
    if not ok and tostring(err):find("module names are dotted project paths", 1, true) then
        refused = refused + 1
    end
end
return refused

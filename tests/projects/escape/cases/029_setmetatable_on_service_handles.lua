-- escape: replace the metatables of service handles and object stubs inside a step body,
-- add fields to a handle, or overwrite a handle's method to fool other code.
-- where: step
-- expect: result {"metatables": "false,false,false,false,false", "replaced": 0, "new_field": "kv handles are read-only", "fresh_handle": "real"}
local wf, svc = ...
local handles = { svc.kv, svc.db, svc.notes, svc.Case, svc.Case("k") }
local mts, replaced = {}, 0
for _, h in ipairs(handles) do
    mts[#mts + 1] = tostring(getmetatable(h))
    if pcall(setmetatable, h, {}) then replaced = replaced + 1 end
end
local _, err = pcall(function() svc.kv.steal = true end)
-- Overwriting a method of one handle changes that table only: a new handle is the real one.
rawset(svc.kv, "get", function() return "forged" end)
local fresh = kv "cases"
fresh:put("probe", "real")
return {
    metatables = table.concat(mts, ","),
    replaced = replaced,
    new_field = tostring(err):match("kv handles are read%-only"),
    fresh_handle = fresh:get("probe"),
}

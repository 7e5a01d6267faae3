-- escape: rewrite the `string` global so every string's methods (shared by all code in the
-- Lua state, the engine included) run attacker code, and bring string.dump back.
-- where: fetch
-- expect: result "X,nil,nil"
string.upper = function() return "pwned" end
string.dump = function() return "bytecode" end
string.format = function() error("hijacked", 0) end
return ("x"):upper() .. "," .. tostring(("x").dump) .. "," .. tostring(rawget(getmetatable("") or {}, "__index"))

-- escape: fail a script's top level with an error object whose __tostring never returns,
-- so loading the project (a deploy) never finishes.
-- where: load
-- expect: refused (error object is a table value)
-- isolate: yes
error(setmetatable({}, { __tostring = function() while true do end end }))

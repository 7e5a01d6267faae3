-- escape: find string.dump (to make bytecode) through the string global, a string's
-- methods, rawget, a fresh chunk and the chunk's own environment.
-- where: queue
-- expect: result "nil,nil,nil,nil,nil"
return table.concat({
    type(string.dump),
    type(("").dump),
    type(rawget(string, "dump")),
    type(load("return string.dump")()),
    type(load("return ('x').dump", "x", "t", {})()),
}, ",")

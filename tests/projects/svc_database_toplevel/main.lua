-- A database call at a script's top level: refused, since top-level code only declares.
local scratch = database "scratch" {}
scratch:exec("CREATE TABLE t (x INTEGER)")

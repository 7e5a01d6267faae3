-- escape: point a database's migrations at a folder outside the project, to read files there.
-- where: load
-- expect: refused is outside the project
database "fine" { migrations = "../../../../../../etc" }

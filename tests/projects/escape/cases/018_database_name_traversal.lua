-- escape: name a database with a path so its SQLite file lands outside the data folder.
-- where: load
-- expect: refused database name '../../evil' is not allowed
database "../../evil" { migrations = "migrations/main" }

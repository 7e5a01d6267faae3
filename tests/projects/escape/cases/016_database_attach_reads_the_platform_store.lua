-- escape: ATTACH the platform's own SQLite store to a project database, plant a secret
-- and read every secret (or rewrite any run's journal). The store's path is found from
-- PRAGMA database_list.
-- where: fetch
-- engine: sqlite
-- expect: error database 'main':query failed: not authorized
local request, svc = ...
local file = svc.db:query("PRAGMA database_list")[1].file
local data = file:match("^(.*)/db/[^/]*$")
svc.db:exec("ATTACH DATABASE ? AS store", { data .. "/lunaflow.sqlite" })
svc.db:exec("INSERT INTO store.secrets (name, version, value) VALUES ('planted', 1, 'by lua')")
return svc.db:query("SELECT name, value FROM store.secrets")

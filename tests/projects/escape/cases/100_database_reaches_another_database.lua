-- escape: create a database of its own on the shared server, or change a setting of the
-- server (both need rights the project's role does not have).
-- engine: postgres
-- where: fetch
-- expect: error permission denied
local request, svc = ...
svc.db:exec("ALTER SYSTEM SET fsync = off")
return "changed"

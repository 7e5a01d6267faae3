-- escape: read a file of the machine through the PostgreSQL server that runs the project's
-- databases (pg_read_file, as a superuser could), here the platform's own store.
-- engine: postgres
-- where: fetch
-- expect: error permission denied for function pg_read_file
local request, svc = ...
return svc.db:query("SELECT pg_read_file('/etc/passwd') AS text")

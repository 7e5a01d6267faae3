-- escape: run a shell command as the database server's user with COPY ... TO PROGRAM.
-- engine: postgres
-- where: fetch
-- expect: error permission denied to COPY to or from an external program
local request, svc = ...
svc.db:exec("COPY (SELECT 1) TO PROGRAM 'touch /tmp/lunaflow-escape-program'")
return "ran"

-- escape: write a file anywhere the server's user may write with COPY ... TO (a superuser
-- or pg_write_server_files could), or run a program with COPY ... TO PROGRAM.
-- engine: postgres
-- where: step
-- expect: error permission denied to COPY to a file
local wf, svc = ...
svc.db:exec("COPY (SELECT 'planted') TO '/tmp/lunaflow-escape-copy.txt'")
return "written"

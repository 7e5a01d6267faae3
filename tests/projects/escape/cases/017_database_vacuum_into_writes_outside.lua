-- escape: write a file anywhere the process may write with VACUUM INTO (here beside the
-- data folder, found from PRAGMA database_list).
-- where: step
-- engine: sqlite
-- expect: error database 'main':query failed: not authorized
local wf, svc = ...
local file = svc.db:query("PRAGMA database_list")[1].file
local outside = file:match("^(.*)/[^/]*/db/[^/]*$") .. "/written-by-lua.sqlite"
svc.db:exec("VACUUM INTO ?", { outside })
return outside

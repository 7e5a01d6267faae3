-- escape: answer with a header value holding CR LF (as a handler echoing a query value
-- would), to add headers of the attacker's choosing (Set-Cookie) or split the response.
-- where: response
-- expect: error header
local request = ...
local value = request.query.v or "a\r\nSet-Cookie: pwned=1"
return { status_code = 200, headers = { ["x-echo"] = value }, body = "hi" }

-- A route that calls any handle method, so tests can use handles from a fetch handler.
--   POST /start  { workflow, input, id }          -> { id } or { err }
--   POST /call   { workflow, id, method, args }   -> { ok, value, err, id, is_nil }
--                 method "id" just reads run.id from the handle get returned
on "fetch" (function(request)
    local body = json.parse(request.body)
    local wf = workflows(body.workflow)
    if request.path == "/start" then
        local ok, run = pcall(function() local r = wf:start(body.input, { id = body.id }); return r end)
        if not ok then return { status_code = 400, body = json.encode({ err = run }) } end
        return { status_code = 200, body = json.encode({ id = run.id }) }
    end
    if request.path == "/call" then
        local handle = nil
        local ok, value = pcall(function()
            handle = wf:get(body.id)
            if body.method == "id" then return handle.id end
            local r = handle[body.method](handle, table.unpack(body.args or {}))
            return r
        end)
        local out = { ok = ok, id = handle and handle.id }
        if ok then out.value = value else out.err = value end
        if ok and value == nil then out.is_nil = true end
        return { status_code = 200, body = json.encode(out) }
    end
    return { status_code = 404, body = "" }
end)

-- tests/seed/test_gotchas.py: another script reaches the workflow with `workflows`.
local settle = workflows "settle-sale"

on "fetch" (function(request)
    local body = request.body ~= "" and json.parse(request.body) or {}
    if request.path == "/start" then
        local run = settle:start({ id = body.id }, { id = "sale-" .. body.id })
        return { status_code = 200, body = run.id }
    elseif request.path == "/pay" then
        local live = settle:get("sale-" .. body.id):signal("paid", { by = body.user })
        return { status_code = 200, body = tostring(live) }
    elseif request.path == "/status" then
        local run = settle:get("sale-" .. body.id)
        return { status_code = 200, body = json.encode({ status = run:status(), result = run:result() }) }
    end
    return { status_code = 404, body = "" }
end)

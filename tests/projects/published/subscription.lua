-- A subscription that says which month it is on (wf:set), read without running its code.
local sub = workflow "subscription" (function(wf, input)
  wf:set("plan", input.plan)
  for month = 1, input.months do
    wf:set("month", month)
    wf:await("renewed", { timeout = "30d" })
  end
  wf:set("done", true)
  return "ended"
end)

local probe = workflow "probe" (function(wf, input)
  local ok, err = pcall(function() wf:set(input.key, input.value) end)
  if input.many then
    for i = 1, input.many do
      ok, err = pcall(function() wf:set("k" .. i, i) end)
      if not ok then break end
    end
  end
  return { ok = ok, err = err and tostring(err) or nil }
end)

local in_step = workflow "in-step" (function(wf)
  return wf:step("s", function() wf:set("x", 1) end)
end)

on "fetch" (function(request)
  local run = sub:get(request.query.id)
  if request.query.key then
    return { status_code = 200, body = json.encode({ value = run:value(request.query.key) }) }
  end
  return { status_code = 200, body = json.encode(run:values()) }
end)

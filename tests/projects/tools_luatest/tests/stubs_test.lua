-- p:stub_object and p:stub_http.

test("an object calling http gets the stub's answer", function(p)
    local seen = {}
    p:stub_http(function(request)
        seen[#seen + 1] = request.method .. " " .. request.url
        return { status = 200, body = "sunny in " .. request.url:match("city=(%w+)") }
    end)
    local r = p:fetch("GET", "/weather", { query = { city = "oslo" } })
    assert_eq(r.status_code, 200)
    assert_eq(r.body, "sunny in oslo")
    assert_eq(seen, { "GET https://weather.example/today?city=oslo" })
end)

test("a step that calls an object that calls http records the stub's answer", function(p)
    p:stub_http(function(request) return { status = 503, body = "down" } end)
    local run = p:start("forecast", { city = "rome" }, { id = "f-1" })
    assert_eq(run.status, "completed")
    assert_eq(run.result, { status = 503, body = "down" })
end)

test("http with no stub fails the call, naming p:stub_http", function(p)
    local run = p:start("forecast", { city = "rome" }, { id = "f-1" })
    assert_eq(run.status, "failed")
    assert_true(run.error:find("p:stub_http", 1, true), run.error)
end)

test("a stubbed object method answers instead of the object, with the key and arguments", function(p)
    local calls = {}
    p:stub_object("Mailer", "send", function(key, to, mail)
        calls[#calls + 1] = { key = key, to = to, subject = mail.subject }
        return "stubbed:" .. to
    end)
    local run = p:start("mail", { to = "ada", subject = "hi" }, { id = "m-1" })
    assert_eq(run.result, "stubbed:ada")
    assert_eq(calls, { { key = "desk", to = "ada", subject = "hi" } })
end)

test("only the stubbed method is replaced: other objects stay real", function(p)
    p:stub_object("Mailer", "send", function() return "stubbed" end)
    local run = p:start("count", { key = "k" }, { id = "c-1" })
    assert_eq(run.result, 1)
    local r = p:fetch("POST", "/count", { body = "k" })
    assert_eq(json.parse(r.body).n, 2)
end)

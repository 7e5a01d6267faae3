-- crypto and Jwt tests (tests/services/test_crypto_jwt.py). Binary strings cannot travel
-- in a JSON reply, so the handler answers hex where bytes are involved.
local function all_bytes()
    local t = {}
    for i = 0, 255 do t[#t + 1] = string.char(i) end
    return table.concat(t)
end

local ops = {}

function ops.sha256(q) return crypto.hex(crypto.sha256(q.s)) end
function ops.sha256_bytes(q) return crypto.hex(crypto.sha256(all_bytes())) end
function ops.hmac(q) return crypto.hex(crypto.hmac_sha256(q.key, q.s)) end
function ops.hmac_bytes(q) return crypto.hex(crypto.hmac_sha256(all_bytes(), all_bytes())) end
function ops.hex(q) return crypto.hex(q.bytes and all_bytes() or q.s) end
function ops.b64(q) return crypto.base64_encode(q.s) end
function ops.b64_decode(q) return crypto.base64_decode(q.s) end
function ops.b64_bytes(q)
    local encoded = crypto.base64_encode(all_bytes())
    local decoded = crypto.base64_decode(encoded)
    return { encoded = encoded, same = decoded == all_bytes(), len = #decoded }
end
function ops.random(q)
    local a, b = crypto.random_bytes(q.n), crypto.random_bytes(q.n)
    return { len = #a, differ = a ~= b, hex = crypto.hex(a) }
end
function ops.sign(q) return Jwt.sign(q.claims, q.key, q.opts) end
function ops.verify(q)
    local claims, err = Jwt.verify(q.token, q.key)
    return { claims = claims, error = err, claims_type = type(claims) }
end
-- A token that expires an hour from now on the platform clock.
function ops.sign_expiring(q)
    return Jwt.sign({ sub = q.sub, exp = os.time() + 3600 }, q.key)
end

-- POST { op, ... }: the op's result, or its error.
on "fetch" (function(request)
    local q = json.parse(request.body)
    local ok, r = pcall(ops[q.op], q)
    return { status_code = 200, body = json.encode({ ok = ok, value = ok and r or nil, error = not ok and r or nil }) }
end)

-- What run code sees of crypto and Jwt: nil in the workflow function and in step bodies.
workflow "absent" (function(wf, input)
    local in_run = { crypto = type(crypto), Jwt = type(Jwt) }
    local in_body = wf:step("probe", function() return { crypto = type(crypto), Jwt = type(Jwt) } end)
    return { run = in_run, body = in_body }
end)

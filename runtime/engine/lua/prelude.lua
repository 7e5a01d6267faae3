-- The engine's Lua half. Runs once per Lua state with the real standard library, before
-- any user code, and returns the `engine` table the Python side drives.
--
-- Why it is written this way:
-- * User code sees only `base` (through a per-script environment). Python callables stay
--   in upvalues here; user code never holds a Python object.
-- * A run parks by `coroutine.yield(ENGINE, cmd)`, never by raising, so a user's pcall
--   cannot swallow it. The sandbox's coroutine.resume forwards ENGINE yields from user
--   coroutines outward, so waits inside a user coroutine still reach the engine.
-- * Every call into user code runs under a count hook that enforces the instruction
--   budget and step timeouts. Once a call is killed every hook and every sandboxed
--   pcall/resume re-raises, so no amount of pcall nesting keeps the call alive.
local host, patterns_src, guards_src = ...

local pack, unpack = table.pack, table.unpack
local raw_yield, raw_resume, raw_create = coroutine.yield, coroutine.resume, coroutine.create
local raw_status, raw_running, raw_close = coroutine.status, coroutine.running, coroutine.close
local raw_pcall, raw_xpcall, raw_error, raw_load = pcall, xpcall, error, load
local sethook, traceback, real_getmt, getinfo = debug.sethook, debug.traceback, debug.getmetatable, debug.getinfo
local PRELUDE_SOURCE = getinfo(1, "S").source
local raw_random, raw_randomseed = math.random, math.randomseed
local sfmt, srep, sbyte, schar, ssub, sgsub = string.format, string.rep, string.byte, string.char, string.sub, string.gsub
local sfind, sgmatch = string.find, string.gmatch
local tconcat, tsort = table.concat, table.sort
local mtype, mhuge, mfloor = math.type, math.huge, math.floor
local utf8len = utf8.len
local setmt, getmt, rawget_, rawset_, next_, type_, tostring_, select_ =
  setmetatable, getmetatable, rawget, rawset, next, type, tostring, select

-- Remove what user code must never reach, from the shared tables themselves: strings
-- share the `string` table as their __index, so ("").dump would otherwise still work.
string.dump = nil
getmt("").__metatable = false

---------------------------------------------------------------------------------------
-- C library functions the count hook cannot reach: pattern matching (patterns.lua) and
-- the string/table loops whose length the caller controls (guards.lua). Both raise their
-- errors as the C functions would, positioned at the caller's line.
---------------------------------------------------------------------------------------
local PATTERNS_SOURCE, GUARDS_SOURCE = "=[lunaflow patterns]", "=[lunaflow guards]"
local ENGINE_SOURCES = { [PRELUDE_SOURCE] = true, [PATTERNS_SOURCE] = true, [GUARDS_SOURCE] = true }
local engine_c = {} -- C functions the guards call, which may call back into the engine

-- The frame luaL_where would name, relative to the function calling this one: the
-- first outside the engine's Lua and the C functions it calls on the user's behalf.
local function library_caller()
  local level = 3
  while true do
    local info = getinfo(level, "Sf")
    if info == nil then return nil end
    if not ENGINE_SOURCES[info.source] and not engine_c[info.func] then return level - 1, info end
    level = level + 1
  end
end

local function library_error(msg)
  local level, info = library_caller()
  if level == nil or info.what == "C" then raw_error(msg, 0) end
  raw_error(msg, level)
end

-- An API refusal names the user's line that made the call. When that call was a tail call
-- (`return wf:continue_as_new(...)`, as the reference writes it) its frame is gone and the
-- level lands in the engine's own code, whose chunk and line the message then named
-- ([string "<python>"]:2045). The engine's frames are skipped to the frame Lua would name
-- past them, which has no line when it is C or the coroutine's base.
do
  local builtin_error = raw_error
  raw_error = function(msg, level)
    if level == 0 or type(msg) ~= "string" then builtin_error(msg, 0) end
    local at = (level or 1) + 1 -- as the caller's level, seen from here
    while true do
      local info = getinfo(at, "Sf")
      if info == nil then builtin_error(msg, 0) end
      if not ENGINE_SOURCES[info.source] and not engine_c[info.func] then builtin_error(msg, at) end
      at = at + 1
    end
  end
end

local QUALIFIED = { find = "string.find", match = "string.match", gmatch = "string.gmatch",
  gsub = "string.gsub", rep = "string.rep", insert = "table.insert", remove = "table.remove",
  move = "table.move", sort = "table.sort", concat = "table.concat", unpack = "table.unpack" }

-- luaL_argerror: the name is the one the caller used, found from how the guard the
-- caller called (the frame just below the caller's) was called.
local function library_argerror(arg, fname, extramsg)
  local level = library_caller()
  local called = level and getinfo(level - 1, "n")
  local name = called and called.name
  if called and called.namewhat == "method" then
    arg = arg - 1
    if arg == 0 then library_error(sfmt("calling '%s' on bad self (%s)", name, extramsg)) end
  end
  library_error(sfmt("bad argument #%d to '%s' (%s)", arg, name or QUALIFIED[fname] or fname, extramsg))
end

---------------------------------------------------------------------------------------
-- Budget: instructions, CPU time and deadlines for the current call.
--
-- A count hook fires every HOOK_EVERY Lua instructions (the count includes the hook's own
-- few instructions). Counting instructions bounds loops but not time: one instruction can
-- take milliseconds (comparing or joining strings of many megabytes), and so can one
-- library call. So the hook also reads the clocks (CPU time, and a step's deadline), at a
-- gap of instructions that adapts to what they cost: it starts short, doubles while the
-- readings find little time between them, up to CLOCK_EVERY, and halves, down to
-- HOOK_MIN (the hook then fires that often), when they find a lot. Only big values make
-- an instruction slow, and they take memory, so the gap is also kept under GAP_BYTES
-- divided by the bytes the state holds: code that ran cheaply for a while and then turns
-- to megabytes is read again within a few seconds at worst. The library wrappers
-- (patterns.lua, guards.lua) read the clocks after C calls whose worst cases add up (see
-- `spent`).
--
-- The process CPU clock (os.clock, no call into Python) paces the readings; the thread's
-- own CPU time, which other threads' work does not inflate, decides the limit, read only
-- once the process clock has passed it.
---------------------------------------------------------------------------------------
local HOOK_EVERY, HOOK_MIN, CLOCK_EVERY = 1000, 100, 10000
local SLOW, FAST = 0.002, 0.0005 -- CPU seconds between two readings: shorten the gap above, lengthen below
-- Instructions between readings, times bytes held: at 0.1-0.3 ns a byte (comparing or
-- joining strings) 5-15 s of the slowest instructions a state of that size allows; below
-- 50 MB the hook still fires every 1,000 instructions, and above it costs code that is
-- in fact cheap up to a third more.
local GAP_BYTES = 5e10
local raw_gc = collectgarbage
local CPU_LIMIT = host.cpu_limit
local proc_clock = os.clock
local budget = {
  left = 0, deadline = nil, timeout_msg = nil, killed = nil,
  cpu_start = nil, thread_start = nil, cpu_last = 0, unclocked = 0, gap = HOOK_MIN, c_work = 0,
}
local hook
local every_of = setmt({}, { __mode = "k" }) -- the count each guarded coroutine's hook has

local function set_every(co, n)
  every_of[co] = n
  sethook(co, hook, "", n)
end

-- The hook's count for at most `limit` instructions between readings, from a few fixed
-- steps: setting a hook walks the whole call stack, so it changes seldom.
local function every_for(limit)
  if limit >= HOOK_EVERY then return HOOK_EVERY end
  if limit >= 500 then return 500 end
  if limit >= 250 then return 250 end
  return HOOK_MIN
end

local function kill(msg)
  budget.killed = msg
  -- Fire on every instruction from now on, so whatever catches this error is stopped at
  -- its next instruction.
  local co = raw_running()
  if co then set_every(co, 1) end
  raw_error(msg, 0)
end

local function over_cpu()
  kill(sfmt("call stopped: it used more than %g s of CPU time; look for work that grows with "
    .. "its input (a long string searched, compared or rebuilt in a loop), or raise "
    .. "limits.cpu_seconds in lunaflow.toml", CPU_LIMIT))
end

local function check_clocks()
  budget.unclocked = 0
  if budget.deadline and host.monotonic() > budget.deadline then kill(budget.timeout_msg) end
  local now = proc_clock()
  local start = budget.cpu_start
  if start == nil then
    budget.cpu_start, budget.cpu_last = now, now
    return
  end
  -- The thread's clock (a call into Python) from the second reading on: a call that reads
  -- the clocks once, most calls, never pays for it.
  if budget.thread_start == nil then budget.thread_start = host.cpu_time() end
  local gap, spent_s = budget.gap, now - budget.cpu_last
  budget.cpu_last = now
  if now - start > CPU_LIMIT and host.cpu_time() - budget.thread_start > CPU_LIMIT then over_cpu() end
  if spent_s > SLOW then
    gap = gap // 2
    if gap < HOOK_MIN then gap = HOOK_MIN end
  elseif spent_s < FAST and gap < CLOCK_EVERY then
    gap = gap * 2
    if gap > CLOCK_EVERY then gap = CLOCK_EVERY end
  end
  budget.gap = gap
end

hook = function()
  if budget.killed then raw_error(budget.killed, 0) end
  local co = raw_running()
  local n = every_of[co]
  local left = budget.left - n
  budget.left = left
  if left <= 0 then
    kill(sfmt("call stopped: it ran past its budget of %d Lua instructions; look for an endless "
      .. "loop, or raise limits.instructions in lunaflow.toml", budget.limit))
  end
  local cap = GAP_BYTES // (raw_gc("count") * 1024)
  local u = budget.unclocked + n
  if u < budget.gap and u < cap then
    budget.unclocked = u
    if cap < n then
      local m = every_for(cap)
      if m ~= n then set_every(co, m) end
    end
    return
  end
  check_clocks()
  local gap = budget.gap
  local m = every_for(cap < gap and cap or gap)
  if m ~= n then set_every(co, m) end
end

-- Library calls report their worst-case work here (in the units of patterns.lua's
-- C_BUDGET, about 3-11 ns each); the clocks are read once C_CLOCK of it has added up.
local C_CLOCK = 1e6
local function spent(units)
  local w = budget.c_work + units
  if w >= C_CLOCK then
    budget.c_work = 0
    check_clocks()
  else
    budget.c_work = w
  end
end

local function guard(co)
  set_every(co, every_for(budget.gap))
end

do
  local lib_opts = { error = library_error, argerror = library_argerror, spent = spent }
  local patterns = raw_load(patterns_src, PATTERNS_SOURCE, "t")(lib_opts)
  local guards = raw_load(guards_src, GUARDS_SOURCE, "t")(lib_opts)
  local routed = patterns.router(engine_c)
  string.find, string.match, string.gmatch, string.gsub = routed.find, routed.match, routed.gmatch, routed.gsub
  string.rep = guards.rep
  table.insert, table.remove, table.move, table.sort = guards.insert, guards.remove, guards.move, guards.sort
  table.concat, table.unpack = guards.concat, guards.unpack
end

local ENGINE = setmt({}, { __tostring = function() return "lunaflow engine yield" end, __metatable = false })

---------------------------------------------------------------------------------------
-- Context: what kind of code is running now.
--   load    a script's top level          handler  a fetch / queue / object handler
--   run     a workflow function           body     a step body
---------------------------------------------------------------------------------------
local ctx = { mode = "load" }

local function in_run_code() return ctx.mode == "run" or ctx.mode == "body" end

-- How deep calls into user code are nested (an object method called from a step body, or
-- from an object method): only the outermost call starts a budget, so a nested call shares
-- its deadline, instruction budget and CPU clock, and a kill stops them all. Every entry
-- that resumes user code counts (load_script, drive, run_body, run_handler_code).
local depth = 0

local function check_killed() if budget.killed then raw_error(budget.killed, 0) end end

local function begin_call(limit, deadline, timeout_msg)
  budget.left, budget.limit, budget.killed = limit, limit, nil
  budget.deadline, budget.timeout_msg = deadline, timeout_msg
  budget.cpu_start, budget.thread_start, budget.unclocked, budget.gap, budget.c_work = nil, nil, 0, HOOK_MIN, 0
end

---------------------------------------------------------------------------------------
-- Safe strings for the host: every string crossing into Python is valid UTF-8.
---------------------------------------------------------------------------------------
local function safe_text(s)
  s = tostring_(s)
  if utf8len(s) then return s end
  return (sgsub(s, "[\128-\255]", "?"))
end

-- Step failures raised into workflows (catch = true) -> the run's error text, weakly.
local step_failures = setmt({}, { __mode = "k" })
local step_failure -- defined with wf:step

local function error_text(e)
  if type_(e) == "string" then return safe_text(e) end
  if type_(e) == "table" then
    if step_failures[e] then return step_failures[e] end
    -- No __tostring: it is user code, and this may run where no budget can stop it.
    if type_(rawget_(e, "message")) == "string" then return safe_text(rawget_(e, "message")) end
  end
  if e == nil then return "nil" end
  return "(error object is a " .. type_(e) .. " value)"
end

-- A traceback of the user's frames. The engine's own Lua (prelude, patterns, guards) and the
-- C functions it calls on the user's behalf (the xpcall around a workflow function) name
-- lines the user cannot act on, so they are left out; a C function the user called (error,
-- pcall) stays, since the user's frame follows it.
local ENGINE_CHUNKS = { getinfo(1, "S").short_src, ssub(PATTERNS_SOURCE, 2), ssub(GUARDS_SOURCE, 2) }

local function user_traceback(tb)
  local lines = {}
  for line in sgmatch(tb .. "\n", "(.-)\n") do lines[#lines + 1] = line end
  local function engine(line)
    if line == nil then return true end
    for _, chunk in ipairs(ENGINE_CHUNKS) do
      if sfind(line, chunk, 1, true) then return true end
    end
    return false
  end
  local out = {}
  for i, line in ipairs(lines) do
    local c_frame = sfind(line, "^%s*%[C%]:") ~= nil
    if not engine(line) and not (c_frame and engine(lines[i + 1])) then out[#out + 1] = line end
  end
  return safe_text(tconcat(out, "\n"))
end

---------------------------------------------------------------------------------------
-- JSON-like values: encode with shape checks that name the bad path.
---------------------------------------------------------------------------------------
local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f",
  ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }
for i = 0, 31 do
  local c = schar(i)
  if not escapes[c] then escapes[c] = sfmt("\\u%04x", i) end
end
escapes["\127"] = "\\u007f"

-- Where in a value the encoder is: path[0] names the value, path[1..depth] the keys and
-- indices below it. The text ("value.items[2].cb") is built only for a refusal, so a
-- value with a key of megabytes is not copied once per element.
local function path_text(path, depth)
  local parts = { path[0] }
  for d = 1, depth do
    local k = path[d]
    parts[d + 1] = mtype(k) == "integer" and "[" .. k .. "]" or "." .. k
  end
  return tconcat(parts)
end

-- A long string is escaped by one C call: it reports its work (about 20 ns a byte) so the
-- budget's CPU clock is read after it.
local LONG_STRING = 65536

local function encode_string(s, path, depth)
  if not utf8len(s) then return nil, "a string that is not valid UTF-8 at " .. path_text(path, depth) end
  if #s >= LONG_STRING then spent(#s * 8) end
  return '"' .. sgsub(s, '[%c"\\]', escapes) .. '"'
end

local MAX_DEPTH = 100  -- as runtime/core/values.py: deeper tables are refused

local function encode_value(v, path, seen, out, depth)
  if depth > MAX_DEPTH then
    return "tables nested deeper than " .. MAX_DEPTH .. " levels at " .. path_text(path, depth - 1)
  end
  local t = type_(v)
  if t == "nil" then out[#out + 1] = "null"
  elseif t == "boolean" then out[#out + 1] = v and "true" or "false"
  elseif t == "number" then
    if mtype(v) == "integer" then out[#out + 1] = sfmt("%d", v)
    elseif v ~= v or v == mhuge or v == -mhuge then return "a non-finite number at " .. path_text(path, depth)
    else
      -- 15 digits, else 16, else 17: the first that reads back as the same number, which
      -- is Python's shortest but for a digit more at a few powers of two. 17 always
      -- ("0.10000000000000001") made json.encode's text and the size a step's values are
      -- held to up to five times what the journal keeps.
      local s = sfmt("%.15g", v)
      if tonumber(s) ~= v then
        s = sfmt("%.16g", v)
        if tonumber(s) ~= v then s = sfmt("%.17g", v) end
      end
      if not s:find("[%.eEn]") then s = s .. ".0" end
      out[#out + 1] = s
    end
  elseif t == "string" then
    local s, err = encode_string(v, path, depth)
    if not s then return err end
    out[#out + 1] = s
  elseif t == "table" then
    if seen[v] then return "a cycle at " .. path_text(path, depth) end
    seen[v] = true
    local n, count, has_string, bad_key = rawlen(v), 0, false, nil
    for k in next_, v do
      count = count + 1
      if type_(k) == "string" then has_string = true
      elseif not (mtype(k) == "integer" and k >= 1 and k <= n) then bad_key = k end
    end
    if bad_key ~= nil then
      return sfmt("a table with a key %s that is neither a string nor part of a 1..n array at %s",
        type_(bad_key) == "number" and tostring_(bad_key) or "of type " .. type_(bad_key), path_text(path, depth))
    end
    if has_string and count > 0 and n > 0 then
      return "a table mixing string keys and array items at " .. path_text(path, depth)
    end
    if not has_string and count ~= n then return "an array with holes at " .. path_text(path, depth) end
    if has_string then
      local keys = {}
      for k in next_, v do keys[#keys + 1] = k end
      tsort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        local ks, err = encode_string(k, path, depth)
        if not ks then return err end
        out[#out + 1] = ks
        out[#out + 1] = ":"
        path[depth + 1] = k
        local problem = encode_value(rawget_(v, k), path, seen, out, depth + 1)
        if problem then return problem end
      end
      out[#out + 1] = "}"
    elseif n == 0 then
      out[#out + 1] = "{}"
    else
      out[#out + 1] = "["
      for i = 1, n do
        if i > 1 then out[#out + 1] = "," end
        path[depth + 1] = i
        local problem = encode_value(rawget_(v, i), path, seen, out, depth + 1)
        if problem then return problem end
      end
      out[#out + 1] = "]"
    end
    seen[v] = nil
  else
    return "a " .. t .. " at " .. path_text(path, depth)
  end
  return nil
end

-- Returns the JSON text, or nil and what is wrong ("a function at value.cb").
local function encode(v, name)
  local out = {}
  local problem = encode_value(v, { [0] = name or "value" }, {}, out, 0)
  if problem then return nil, problem end
  return tconcat(out)
end

local VALUE_RULE = "values must be JSON-like (nil, booleans, numbers, strings, tables with string "
  .. "keys or 1..n arrays) — pass plain data"

-- Encode or raise at the caller's level, naming what was being encoded.
local function encode_or_raise(v, what, level)
  local s, problem = encode(v, "value")
  if not s then raw_error(what .. " holds " .. problem .. "; " .. VALUE_RULE, level + 1) end
  return s
end

-- Encode a list of n values ({n=.., ...}) as a JSON array. On a bad value, nil and what
-- is wrong; `holds` turns that into the refusal (callers name the list only then, so a
-- good list costs no message).
local function encode_list(t, from)
  from = from or 1
  local out, seen, path = { "[" }, {}, {}
  for i = from, t.n do
    if i > from then out[#out + 1] = "," end
    path[0] = "[" .. (i - from + 1) .. "]"
    local problem = encode_value(t[i], path, seen, out, 0)
    if problem then return nil, problem end
  end
  out[#out + 1] = "]"
  return tconcat(out)
end

local function holds(what, problem) return what .. " holds " .. problem .. "; " .. VALUE_RULE end

---------------------------------------------------------------------------------------
-- Host calls: Python returns (true, value) or (false, message); we raise the message at
-- the user's call site so tracebacks point at their line.
---------------------------------------------------------------------------------------
-- Raise `msg` positioned at the nearest Lua frame of user code, however deep in the
-- prelude (and however many tail calls) the refusal was found.
local function raise_at_user(msg)
  local level = 2
  while true do
    local info = getinfo(level, "S")
    if info == nil then raw_error(msg, 0) end
    if info.source ~= PRELUDE_SOURCE and info.what ~= "C" then raw_error(msg, level) end
    level = level + 1
  end
end

-- Python may build values of any size while it holds the state, so the memory limit is
-- lifted around the call and armed again after (host_arm and host_lift take and return
-- nothing: calling them allocates nothing in Lua). A state the answer left over its limit
-- fails its next allocation here, in Lua, where that is an ordinary error.
local host_arm, host_lift, host_call, host_monotonic = host.arm, host.lift, host.call, host.monotonic
local function call_host(fname, ...)
  host_lift()
  local r = pack(host_call(fname, ...))
  host_arm()
  check_killed()
  -- Time spent in the host counts against a step's deadline (an HTTP call, a query): the
  -- hook alone would not read the clock again before the body returns.
  if budget.deadline and host_monotonic() > budget.deadline then kill(budget.timeout_msg) end
  if not r[1] then raise_at_user(r[2]) end
  return unpack(r, 2, r.n)
end

---------------------------------------------------------------------------------------
-- Engine commands: yield to whoever drives the workflow coroutine.
---------------------------------------------------------------------------------------
local function command(cmd)
  local reply = raw_yield(ENGINE, cmd)
  if reply and reply.error then raise_at_user(reply.error) end
  return reply
end

---------------------------------------------------------------------------------------
-- The sandbox's coroutine library: user coroutines are guarded like their parent, and
-- engine yields pass through them to the engine.
---------------------------------------------------------------------------------------
local user_threads = setmt({}, { __mode = "k" })

local function sb_create(fn)
  if type_(fn) ~= "function" then raw_error("coroutine.create expects a function", 2) end
  local co = raw_create(fn)
  guard(co)
  user_threads[co] = true
  return co
end

local function own_thread(co, what)
  if not user_threads[co] then
    raw_error(what .. " expects a coroutine created by this code", 3)
  end
end

-- User coroutines parked inside an engine command (a step or wait waiting for its
-- answer): only the engine may resume them, or a handler could forge a wait's answer.
local engine_parked = setmt({}, { __mode = "k" })

local function sb_resume(co, ...)
  own_thread(co, "coroutine.resume")
  if engine_parked[co] then
    raw_error("coroutine.resume: this coroutine is waiting for a workflow step or wait; "
      .. "only the engine resumes it", 2)
  end
  local r = pack(raw_resume(co, ...))
  while r[1] and r[2] == ENGINE and raw_status(co) == "suspended" do
    engine_parked[co] = true
    local reply = pack(raw_yield(ENGINE, r[3]))
    engine_parked[co] = nil
    r = pack(raw_resume(co, unpack(reply, 1, reply.n)))
  end
  check_killed()
  return unpack(r, 1, r.n)
end

local function sb_wrap(fn)
  local co = sb_create(fn)
  return function(...)
    local r = pack(sb_resume(co, ...))
    if not r[1] then raw_error(r[2], 2) end
    return unpack(r, 2, r.n)
  end
end

local function sb_yield(...)
  local _, main = raw_running()
  if main or not user_threads[raw_running()] then
    raw_error("coroutine.yield was called outside a coroutine created by this code", 2)
  end
  return raw_yield(...)
end

local sb_coroutine = {
  create = sb_create, resume = sb_resume, wrap = sb_wrap, yield = sb_yield,
  isyieldable = function() return user_threads[raw_running()] ~= nil end,
  running = function()
    local co = raw_running()
    if user_threads[co] then return co, false end
    return nil, true
  end,
  status = function(co) own_thread(co, "coroutine.status") return raw_status(co) end,
  close = function(co) own_thread(co, "coroutine.close") return raw_close(co) end,
}

local function sb_pcall(f, ...)
  local r = pack(raw_pcall(f, ...))
  check_killed()
  return unpack(r, 1, r.n)
end

local function sb_xpcall(f, handler, ...)
  local r = pack(raw_xpcall(f, handler, ...))
  check_killed()
  return unpack(r, 1, r.n)
end

---------------------------------------------------------------------------------------
-- Determinism: time and randomness.
---------------------------------------------------------------------------------------
local function journaled(call, ...)
  if ctx.mode == "run" then
    return command({ op = "value", call = call, args = pack(...) }).value
  end
  return nil
end

local function sb_time(t)
  if t ~= nil then return os.time(t) end
  if ctx.mode == "run" then return journaled("os.time") end
  if ctx.mode == "body" then return ctx.now_s end
  return call_host("now")
end

local function sb_clock()
  if ctx.mode == "run" then return journaled("os.clock") end
  -- A step body's values are recorded, so a body may measure its own CPU time.
  return os.clock()
end

local function apply_random_args(u, m, n)
  -- Turn a uniform float in [0,1) into what math.random(m, n) returns.
  if m == nil then return u end
  if n == nil then m, n = 1, m end
  if mtype(m) ~= "integer" or mtype(n) ~= "integer" then raw_error("bad argument to 'random' (number has no integer representation)", 3) end
  if m > n then raw_error("bad argument to 'random' (interval is empty)", 3) end
  return m + mfloor(u * (n - m + 1))
end

local function sb_random(m, n)
  if ctx.mode == "run" then
    return apply_random_args(journaled("math.random"), m, n)
  end
  -- Step bodies draw from a generator seeded with the step id (see run_body), so a body
  -- re-run after a crash sees the same numbers; elsewhere the generator is seeded afresh.
  if m == nil then return raw_random() end
  return apply_random_args(raw_random(), m, n)
end

local function uuid_from(rand)
  local b = {}
  for i = 1, 16 do b[i] = rand(0, 255) end
  b[7] = (b[7] & 0x0f) | 0x40
  b[9] = (b[9] & 0x3f) | 0x80
  return sfmt("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", unpack(b))
end

local function sb_uuid()
  if ctx.mode == "run" then return journaled("uuid.v4") end
  return uuid_from(raw_random)
end

local function refuse_in_run(name, why)
  return function(...)
    if in_run_code() then raw_error(name .. " is refused in run code: " .. why, 2) end
    return call_host(name, ...)
  end
end

-- Lua 5.4 seeds its table hashes per state, so `next` (and `pairs`) walk keys in another
-- order in another process, and a table, function or coroutine key has no order but its
-- address. In the workflow function either would let replay take another path, so there
-- `pairs` and `next` walk keys in one fixed order (booleans, numbers, strings; each by
-- value) and refuse keys that only have an address.
local KEY_RANK = { boolean = 1, number = 2, string = 3 }

local function key_less(a, b)
  local ra, rb = KEY_RANK[type_(a)], KEY_RANK[type_(b)]
  if ra ~= rb then return ra < rb end
  if ra == 1 then return (not a) and b end
  return a < b
end

local function refuse_key(k)
  raise_at_user(sfmt("pairs/next over a table with a %s key is refused in the workflow function: such "
    .. "keys are ordered by their address, which a replay does not reproduce; key the table by "
    .. "strings or numbers, or keep the items in an array and walk it with ipairs", type_(k)))
end

-- The table's keys in order, checked.
local function sorted_keys(t)
  local keys, n = {}, 0
  for k in next_, t do
    if not KEY_RANK[type_(k)] then refuse_key(k) end
    n = n + 1
    keys[n] = k
  end
  tsort(keys, key_less)
  return keys, n
end

-- `next` in key order. A walk (next(t) then next(t, k)...) sorts the keys at its second
-- step and keeps them for the table; a key the kept order does not hold sorts them again.
-- Like Lua's own `next`, a walk that adds keys to the table meets them or not (here: not),
-- the same way on every replay.
local walk_of = setmt({}, { __mode = "k" }) -- table -> { keys = sorted keys, at = key -> index }

local function ordered_next(t, k)
  if k == nil then
    walk_of[t] = nil
    local first
    for key in next_, t do
      if not KEY_RANK[type_(key)] then refuse_key(key) end
      if first == nil or key_less(key, first) then first = key end
    end
    if first == nil then return nil end
    return first, rawget_(t, first)
  end
  local walk = walk_of[t]
  local i = walk and walk.at[k]
  if i == nil then
    local keys, n = sorted_keys(t)
    local at = {}
    for j = 1, n do at[keys[j]] = j end
    walk = { keys = keys, at = at }
    walk_of[t] = walk
    i = at[k]
    if i == nil then raw_error("invalid key to 'next'", 2) end
  end
  local keys = walk.keys
  while true do
    i = i + 1
    local nk = keys[i]
    if nk == nil then return nil end
    local v = rawget_(t, nk)
    if v ~= nil then return nk, v end -- a key cleared during the walk is passed over
  end
end

local raw_pairs = pairs
local function sb_pairs(t)
  if ctx.mode ~= "run" or type_(t) ~= "table" then return raw_pairs(t) end
  local mt = real_getmt(t)
  if mt and mt.__pairs then return raw_pairs(t) end
  local keys = sorted_keys(t)
  local i = 0
  return function()
    while true do
      i = i + 1
      local k = keys[i]
      if k == nil then return nil end
      local v = rawget_(t, k)
      if v ~= nil then return k, v end
    end
  end, t, nil
end

local function sb_next(t, k)
  if ctx.mode ~= "run" or type_(t) ~= "table" then return next_(t, k) end
  return ordered_next(t, k)
end

---------------------------------------------------------------------------------------
-- Effects: services refuse outside the places effects belong.
---------------------------------------------------------------------------------------
local function effect_guard(what)
  if ctx.mode == "run" then raise_at_user(what .. " is an effect and belongs inside wf:step") end
  if ctx.mode == "load" then
    raise_at_user(what .. " is an effect, and a script's top level only declares things; "
      .. "call it from a handler or inside wf:step")
  end
end

local declared = { workflow = {}, object = {}, queue = {}, fetch = {}, schedule = {} }

-- A second declaration names the script being loaded first, then the one that declared
-- the name before it.
local function declare(kind, name, label)
  local by = declared[kind][name]
  if by then
    if kind == "workflow" then
      raw_error(sfmt("workflow '%s' is declared in both %s and %s; one script per project declares "
        .. "a given workflow — reach it elsewhere with workflows \"%s\"", name, ctx.script, by, name), 3)
    end
    raw_error(sfmt("%s is declared in both %s and %s; one script per project declares it",
      label, ctx.script, by), 3)
  end
  declared[kind][name] = ctx.script
end

local function must_be_top_level(what)
  if ctx.mode ~= "load" then
    raw_error(what .. " must be declared at the top level of a script, not while the project runs", 3)
  end
end

local function check_name(v, what)
  if type_(v) ~= "string" or v == "" or not utf8len(v) then
    raw_error(sfmt("%s needs a non-empty string name (got %s)", what, type_(v)), 3)
  end
end

-- A handle for a service: each method checks where it is called, then calls the host.
-- exec returns { changes = n } on every platform: Aurora PostgreSQL (through the Data API)
-- cannot return a last insert id, so a script reading one is told where ids come from.
local function exec_result_mt(name)
  return { __index = function(_, k)
    if k == "last_insert_id" then
      raw_error(sfmt("database '%s':exec returns { changes = n } only: there is no last_insert_id "
        .. "(Aurora PostgreSQL cannot return one); get a generated id with RETURNING through :first, "
        .. "e.g. database \"%s\":first(\"INSERT INTO t (name) VALUES (?) RETURNING id\", { name }).id", name, name), 2)
    end
    return nil
  end }
end

local function service(kind, name, methods)
  local h = {}
  for _, m in ipairs(methods) do
    local what = kind .. ":" .. m
    h[m] = function(self, ...)
      effect_guard(what)
      local args = pack(...)
      local json, problem = encode_list(args)
      if not json then raw_error(holds(what .. " arguments", problem), 2) end
      local r = call_host("service", kind, name, m, json)
      if kind == "database" and m == "exec" and type_(r[1]) == "table" then setmt(r[1], exec_result_mt(name)) end
      return unpack(r, 1, r.n)
    end
  end
  return setmt(h, { __metatable = false, __newindex = function() raw_error(kind .. " handles are read-only", 2) end })
end

---------------------------------------------------------------------------------------
-- Workflows: declarations, handles, runs.
---------------------------------------------------------------------------------------
local workflow_fns = {}
local run_methods = {}

local function run_handle(wf_name, id)
  local h = { id = id, workflow = wf_name }
  return setmt(h, { __index = run_methods, __metatable = false })
end

function run_methods.status(self)
  effect_guard("run:status")
  return call_host("run_status", self.workflow, self.id)
end

-- The run's generations (wf:continue_as_new): { current = n, earlier = { { generation,
-- first_seq, last_seq, started_at, input, ended }, ... } }, oldest first.
function run_methods.generations(self)
  effect_guard("run:generations")
  local r = call_host("run_generations", self.workflow, self.id)
  return r[1]
end

function run_methods.result(self)
  effect_guard("run:result")
  local r = call_host("run_result", self.workflow, self.id)
  return r[1]
end

-- run:value("month"): the latest value the run published for the key (wf:set), or nil;
-- run:values(): all of them. Read from the store, without running the run's code.
function run_methods.value(self, key)
  effect_guard("run:value")
  check_name(key, "run:value")
  local r = call_host("run_value", self.workflow, self.id, key)
  return r[1]
end

function run_methods.values(self)
  effect_guard("run:values")
  return call_host("run_values", self.workflow, self.id)
end

-- A value whose JSON here is over `host.surely_over` (values.SURELY_OVER_IN_LUA) is over
-- the limit however Python writes it: refused with its size alone, before Python holds a
-- copy of its text (a megabyte payload would be copied, parsed and written again). On the
-- host table, which user code never sees: the main chunk has no local left.
function host.crossing(json, what)
  if #json > host.surely_over then call_host("value_too_large", what, #json) end
  return json
end

function run_methods.signal(self, name, payload)
  effect_guard("run:signal")
  check_name(name, "run:signal")
  local json = encode_or_raise(payload, sfmt("the payload of signal '%s'", name), 2)
  json = host.crossing(json, sfmt("the payload of signal '%s' for run '%s'", name, self.id))
  return call_host("run_signal", self.workflow, self.id, name, json)
end

function run_methods.cancel(self)
  effect_guard("run:cancel")
  return call_host("run_cancel", self.workflow, self.id)
end

function run_methods.resume(self)
  effect_guard("run:resume")
  return call_host("run_resume", self.workflow, self.id)
end

local workflow_methods = {}

local START_OPTIONS = { id = true, timeout = true, signal = true, payload = true }

function workflow_methods.start(self, input, opts)
  effect_guard("workflow:start")
  local json = encode_or_raise(input, sfmt("the input of workflow '%s'", self.name), 2)
  local id, timeout, signal, payload = nil, nil, nil, nil
  if opts ~= nil then
    if type_(opts) ~= "table" then raw_error("workflow:start options must be a table like { id = \"...\" }", 2) end
    -- A misspelt option would be dropped without a word (a `singal` never delivered), so
    -- an unknown one is refused; the first in sorted order is named, whatever hash order.
    local bad = {}
    for k in next_, opts do
      if not (type_(k) == "string" and START_OPTIONS[k]) then
        bad[#bad + 1] = type_(k) == "string" and sfmt("'%s'", ssub(k, 1, 64)) or sfmt("[%s]", tostring_(k))
      end
    end
    if #bad > 0 then
      tsort(bad)
      raw_error(sfmt("workflow:start of '%s': unknown option %s; the options are id, timeout, signal and "
        .. "payload, e.g. { id = \"order-1\", signal = \"paid\", payload = { by = \"ada\" } }", self.name, bad[1]), 2)
    end
    id, timeout, signal = opts.id, opts.timeout, opts.signal
    if signal ~= nil and type_(signal) ~= "string" then
      raw_error(sfmt("workflow:start of '%s': signal must be a signal's name, a non-empty string (got %s), "
        .. "e.g. { id = \"order-1\", signal = \"paid\" }", self.name, type_(signal)), 2)
    end
    if opts.payload ~= nil then
      payload = encode_or_raise(opts.payload, sfmt("the payload of signal '%s'", tostring_(signal)), 2)
      payload = host.crossing(payload, sfmt("the payload of signal '%s'", tostring_(signal)))
    end
  end
  json = host.crossing(json, type_(id) == "string" and sfmt("the input of run '%s'", id)
    or sfmt("the input of a run of workflow '%s'", self.name))
  local run_id = call_host("run_start", self.name, json, id, timeout, signal, payload)
  return run_handle(self.name, run_id)
end

function workflow_methods.get(self, id)
  return run_handle(self.name, call_host("run_check_id", id))
end

local function workflow_handle(name)
  return setmt({ name = name }, { __index = workflow_methods, __metatable = false })
end

-- Workflow-level options, `workflow "name" { timeout = "30d" } (function ... end)`: the
-- timeout every start of it gets unless the start names its own (checked by the host).
local workflow_timeouts = {}
-- Flow control (concurrency, rate, priority), checked here at load; the gate a run passes
-- before its function is built from it (engine.new_run).
local flowlib = { workflows = {}, collects = {},
  OPTIONS = { timeout = true, concurrency = true, rate = true, priority = true, debounce = true, batch = true } }

function flowlib.error(name, msg)
  raw_error(sfmt("workflow '%s': %s", name, msg), 4)
end

function flowlib.limit(name, c)
  if type_(c) ~= "table" then
    flowlib.error(name, "each concurrency limit is a table like { limit = 2, key = function(input) return input.customer end }")
  end
  for k in next_, c do
    if k ~= "limit" and k ~= "key" and k ~= "scope" then
      flowlib.error(name, sfmt("unknown concurrency option %s; the options are limit, key and scope", tostring_(k)))
    end
  end
  if type_(c.limit) ~= "number" then
    flowlib.error(name, "concurrency needs a limit, a whole number of runs, e.g. { limit = 2 }")
  end
  if c.key ~= nil and type_(c.key) ~= "function" then
    flowlib.error(name, "a concurrency key is a function of the input, e.g. key = function(input) return input.customer end")
  end
  if c.scope ~= nil and type_(c.scope) ~= "string" then
    flowlib.error(name, "a concurrency scope is a name several workflows may share, a string")
  end
  return { limit = c.limit, key = c.key, scope = c.scope or name }
end

function flowlib.options(name, o)
  local flow = { slots = {} }
  if o.concurrency ~= nil then
    local c = o.concurrency
    if type_(c) ~= "table" then flowlib.error(name, "concurrency must be a table like { limit = 2 }") end
    local list = c.limit ~= nil and { c } or c
    if #list == 0 or #list > 4 then
      flowlib.error(name, "concurrency is one limit { limit = 2, ... } or a list of 1 to 4 of them")
    end
    local seen = {}
    for i = 1, #list do
      local l = flowlib.limit(name, list[i])
      local id = l.scope .. (l.key and "/*" or "")
      if seen[id] then
        flowlib.error(name, sfmt("two concurrency limits are both %s; give one a scope = \"...\" of its own", id))
      end
      seen[id] = true
      flow.slots[i] = l
    end
  end
  if o.rate ~= nil then
    local r = o.rate
    if type_(r) == "string" then r = { limit = r } end
    if type_(r) ~= "table" or type_(r.limit) ~= "string" or (r.key ~= nil and type_(r.key) ~= "function") then
      flowlib.error(name, "rate must be a rate like \"10/s\" or { limit = \"10/s\", key = function(input) ... end }")
    end
    flow.rate = { limit = r.limit, key = r.key }
  end
  if o.priority ~= nil then
    if type_(o.priority) ~= "number" and type_(o.priority) ~= "function" then
      flowlib.error(name, "priority is a number or a function of the input returning one (higher goes first)")
    end
    flow.priority = o.priority
  end
  if o.debounce ~= nil and o.batch ~= nil then
    flowlib.error(name, "has both debounce and batch; a workflow collects its starts one way")
  end
  for _, kind in ipairs({ "debounce", "batch" }) do
    local c = o[kind]
    if c ~= nil then
      local allowed = kind == "batch" and { size = true, window = true, key = true }
        or { window = true, key = true, max_wait = true, keep = true }
      if type_(c) ~= "table" then
        flowlib.error(name, sfmt("%s must be a table like %s", kind, kind == "batch"
          and "{ size = 50, window = \"10s\", key = \"user\" }" or "{ window = \"5s\", key = \"doc\" }"))
      end
      for k in next_, c do
        if not allowed[k] then
          flowlib.error(name, sfmt("unknown %s option %s; the options are %s", kind, tostring_(k),
            kind == "batch" and "size, window and key" or "window, key, max_wait and keep"))
        end
      end
      if c.key ~= nil and type_(c.key) ~= "string" then
        flowlib.error(name, sfmt("the key of %s names a field of the input, e.g. key = \"customer\"", kind))
      end
      if kind == "batch" and c.size == nil then
        flowlib.error(name, "batch needs a size, e.g. batch = { size = 50, window = \"10s\" }")
      end
      if c.window == nil then
        flowlib.error(name, sfmt("%s needs a window, e.g. window = \"5s\"", kind))
      end
      flowlib.collects[name] = { kind = kind, window = c.window, key = c.key, size = c.size,
        max_wait = c.max_wait, keep = c.keep }
      flow.collect = true
    end
  end
  if #flow.slots == 0 and flow.rate == nil and flow.priority == nil and not flow.collect then return nil end
  return flow
end

local function sb_workflow(name)
  check_name(name, "workflow")
  must_be_top_level("workflow '" .. name .. "'")
  local timeout, flow = nil, nil
  local function with_fn(fn)
    if type_(fn) ~= "function" then
      raw_error(sfmt("workflow '%s' needs a function: workflow \"%s\" (function(wf, input) ... end)", name, name), 2)
    end
    declare("workflow", name, "workflow '" .. name .. "'")
    workflow_fns[name] = fn
    workflow_timeouts[name] = timeout
    flowlib.workflows[name] = flow
    return workflow_handle(name)
  end
  return function(fn_or_opts)
    if type_(fn_or_opts) ~= "table" then return with_fn(fn_or_opts) end
    for k in next_, fn_or_opts do
      if not flowlib.OPTIONS[k] then
        raw_error(sfmt("workflow '%s': unknown option %s; the workflow options are timeout, concurrency, "
          .. "rate and priority, e.g. workflow \"%s\" { timeout = \"30d\" } (function(wf, input) ... end)",
          name, type_(k) == "string" and sfmt("'%s'", k) or tostring_(k), name), 2)
      end
    end
    timeout = fn_or_opts.timeout
    flow = flowlib.options(name, fn_or_opts)
    return with_fn
  end
end

local function sb_workflows(name)
  check_name(name, "workflows")
  return workflow_handle(name)
end

---------------------------------------------------------------------------------------
-- The `wf` object handed to a workflow function.
---------------------------------------------------------------------------------------
local wf_methods = {}

local function wf_check(self, what)
  if ctx.mode == "body" then
    return raw_error(sfmt("%s was called inside step '%s'; steps and waits belong in the workflow "
      .. "function, not in a step body", what, ctx.step), 3)
  end
  if ctx.mode ~= "run" or ctx.wf ~= self then
    raw_error(what .. " can only be called by the workflow function its wf was handed to", 3)
  end
end

local STEP_OPTIONS = { retries = true, backoff = true, max_backoff = true, jitter = true,
  timeout = true, catch = true, rate = true }
local STEP_OPTION_LIST = "retries, backoff, max_backoff, jitter, timeout, catch and rate"

-- The first unknown key of a step's options, shown, or nil. Keys are sorted so the one
-- named does not depend on the table's hash order.
local function unknown_option(o, allowed)
  allowed = allowed or STEP_OPTIONS
  local bad = {}
  for k in next_, o do
    if not (type_(k) == "string" and allowed[k]) then
      bad[#bad + 1] = type_(k) == "string" and sfmt("'%s'", ssub(k, 1, 64)) or sfmt("[%s]", tostring_(k))
    end
  end
  if #bad == 0 then return nil end
  tsort(bad)
  return bad[1]
end

-- A step's final failure raised into the workflow (catch = true): a table with step,
-- attempts, message (the last attempt's error) and retry (false when the error said so);
-- tostring gives the run's error had it not been caught. Uncaught, the run fails with
-- that same text (error_text reads it from step_failures).
local FAILURE_MT = { __tostring = function(f) return step_failures[f] end, __metatable = false }

function step_failure(raised)
  local f = setmt({ step = raised.step, attempts = raised.attempts, message = raised.message,
    retry = raised.retryable }, FAILURE_MT)
  step_failures[f] = raised.error
  return f
end

function wf_methods.step(self, name, opts, fn)
  if ctx.mode == "body" then
    raw_error(sfmt("steps do not nest: step '%s' was called inside step '%s'", tostring_(name), ctx.step), 2)
  end
  wf_check(self, "wf:step")
  if fn == nil and type_(opts) == "function" then fn, opts = opts, nil end
  check_name(name, "wf:step")
  if type_(fn) ~= "function" then
    raw_error(sfmt("wf:step('%s', ...) needs a function as its last argument", name), 2)
  end
  if opts ~= nil and type_(opts) ~= "table" then
    raw_error(sfmt("wf:step('%s', opts, fn): opts must be a table like { retries = 3 }", name), 2)
  end
  local o = opts or {}
  local unknown = unknown_option(o)
  if unknown then
    raw_error(sfmt("wf:step('%s'): unknown option %s; the options are %s — check its spelling",
      name, unknown, STEP_OPTION_LIST), 2)
  end
  local rate_limit, rate_key = nil, nil
  if o.rate ~= nil then
    local r = o.rate
    if type_(r) == "string" then r = { limit = r } end
    if type_(r) ~= "table" or type_(r.limit) ~= "string" or (r.key ~= nil and type_(r.key) ~= "string") then
      raw_error(sfmt("wf:step('%s'): rate must be a rate like \"10/s\" or a table like "
        .. "{ limit = \"10/s\", key = \"stripe\" } (key: the name of the bucket steps share)", name), 2)
    end
    rate_limit, rate_key = r.limit, r.key
  end
  local reply = command({ op = "step", name = name, retries = o.retries, backoff = o.backoff,
    timeout = o.timeout, fn = fn, catch = o.catch, max_backoff = o.max_backoff, jitter = o.jitter,
    rate_limit = rate_limit, rate_key = rate_key })
  if reply.raise then raw_error(step_failure(reply.raise), 2) end
  return unpack(reply, 1, reply.n)
end

-- wf:version("change-id"): true for runs started by code that names the change, false for
-- runs started before it was deployed. Branch on it to change code under runs in flight.
function wf_methods.version(self, change)
  wf_check(self, "wf:version")
  check_name(change, "wf:version")
  return command({ op = "version", change = change }).value
end

-- wf:set("month", 7): publish a value, journaled; the store keeps the latest per key beside
-- the run (run:value("month") reads it, lunaflow runs --where month=7 finds the run).
function wf_methods.set(self, key, value)
  wf_check(self, "wf:set")
  local json = encode_or_raise(value, sfmt("wf:set('%s', ...)", tostring_(key)), 2)
  command({ op = "set", key = key, value = json })
end

function wf_methods.sleep(self, duration)
  wf_check(self, "wf:sleep")
  command({ op = "wait", kind = "sleep", names = {}, timeout = duration })
end

-- A misspelt option ({ timeot = "1h" }) was ignored, and the wait it meant to bound waited
-- for ever.
-- (The main chunk is at Lua's 200 locals: the option sets live inside the block.)
local wait_opts
do
  local WAIT_OPTIONS = { timeout = true }
  local ALL_OPTIONS = { timeout = true, within = true }

  function wait_opts(opts, what)
    if opts == nil then return nil end
    if type_(opts) ~= "table" then raw_error(what .. " options must be a table like { timeout = \"48h\" }", 3) end
    local allowed = what == "wf:all" and ALL_OPTIONS or WAIT_OPTIONS
    local unknown = unknown_option(opts, allowed)
    if unknown then
      raw_error(sfmt("%s: unknown option %s; the options are %s, e.g. { timeout = \"48h\" } — check its "
        .. "spelling", what, unknown, what == "wf:all" and "timeout and within" or "timeout"), 3)
    end
    return opts.timeout
  end
end

function wf_methods.await(self, name, opts)
  wf_check(self, "wf:await")
  check_name(name, "wf:await")
  local reply = command({ op = "wait", kind = "await", names = { name }, timeout = wait_opts(opts, "wf:await") })
  return reply.payload
end

local function name_list(names, what)
  if type_(names) ~= "table" or #names == 0 then
    raw_error(what .. " needs a list of signal names like { \"paid\", \"cancelled\" }", 3)
  end
  local out = {}
  for i = 1, #names do
    if type_(names[i]) ~= "string" or names[i] == "" then
      raw_error(sfmt("%s: signal name %d must be a non-empty string", what, i), 3)
    end
    out[i] = names[i]
  end
  return out
end

function wf_methods.race(self, names, opts)
  wf_check(self, "wf:race")
  local list = name_list(names, "wf:race")
  local reply = command({ op = "wait", kind = "race", names = list, timeout = wait_opts(opts, "wf:race") })
  return reply.payload, reply.signal
end

function wf_methods.all(self, names, opts)
  wf_check(self, "wf:all")
  local list = name_list(names, "wf:all")
  local timeout = wait_opts(opts, "wf:all")
  -- `within` bounds the whole wait: the first entry journals when that falls (bound_at),
  -- and every later entry waits at most until then.
  local within = opts ~= nil and opts.within or nil
  local bound = nil
  local out = { n = #list }
  for i, name in ipairs(list) do
    local reply = command({ op = "wait", kind = "all", names = { name }, timeout = timeout,
      within = within, bound = bound })
    out[i] = reply.payload
    bound = reply.bound_at or bound
  end
  return unpack(out, 1, out.n)
end

-- wf:on_cancel(fn) / wf:on_cancel({ timeout = "15m" }, fn): what the run does when it is
-- cancelled. Journaled where it is called (the cancel, which needs no code, reads it there);
-- a cancel then leaves the workflow function where it stands and runs `fn` in its place, its
-- steps durable like any. One handler per run, registered by the workflow function itself.
local cleanups = setmt({}, { __mode = "k" }) -- wf -> its cancel handler

function wf_methods.on_cancel(self, opts, fn)
  wf_check(self, "wf:on_cancel")
  if fn == nil and type_(opts) ~= "table" then fn, opts = opts, nil end
  if type_(fn) ~= "function" then
    raw_error(sfmt("wf:on_cancel needs a function (got a %s value); write "
      .. "wf:on_cancel(function() wf:step(\"release\", ...) end)", type_(fn)), 2)
  end
  if opts ~= nil then
    for k in next_, opts do
      if k ~= "timeout" then
        raw_error(sfmt("wf:on_cancel: unknown option %s; its only option is timeout, the cleanup's "
          .. "time budget, e.g. wf:on_cancel({ timeout = \"15m\" }, fn)",
          type_(k) == "string" and sfmt("'%s'", ssub(k, 1, 64)) or tostring_(k)), 2)
      end
    end
  end
  if cleanups[self] ~= nil then
    raw_error(sfmt("wf:on_cancel was called twice in run '%s'; a run has one cancel handler — "
      .. "register it once, in the workflow function, and let that one function undo everything",
      ctx.run), 2)
  end
  command({ op = "on_cancel", timeout = opts and opts.timeout })
  cleanups[self] = fn
end

---------------------------------------------------------------------------------------
-- Child runs: wf:child starts (or joins) a run as this run's child, journaled once, with no
-- step around it; c:result() parks until the child ends and answers its result, or raises
-- a child failure (catchable like a step's caught failure) when it failed, was cancelled or
-- the wait timed out. In a block of its own: the main chunk's locals are near Lua's 200.
---------------------------------------------------------------------------------------
do
local CHILD_OPTIONS = { id = true, timeout = true }
local child_methods = {}
local CHILD_MT = { __index = child_methods, __metatable = false,
  __newindex = function() raw_error("a child handle is read-only", 2) end }
local child_state = setmt({}, { __mode = "k" }) -- handle -> { wf = ..., asked = ..., reply = ... }

-- A child's failure raised into the workflow: child, workflow, status (failed, cancelled or
-- timeout) and message; tostring gives the run's error had it not been caught (error_text
-- reads it from step_failures, as for a step's).
local function child_failure(c, reply)
  local text
  if reply.by == "timeout" then
    text = sfmt("child '%s' (workflow '%s') did not end within the timeout of c:result(); it goes on "
      .. "running — catch this to wait again or cancel it", c.id, c.workflow)
  else
    text = sfmt("child '%s' (workflow '%s') %s: %s", c.id, c.workflow,
      reply.by == "cancelled" and "was cancelled" or "failed", tostring_(reply.message))
  end
  local f = setmt({ child = c.id, workflow = c.workflow, status = reply.by,
    message = reply.by == "timeout" and text or reply.message }, FAILURE_MT)
  step_failures[f] = text
  return f
end

function wf_methods.child(self, workflow, input, opts)
  wf_check(self, "wf:child")
  if type_(workflow) == "table" and type_(workflow.name) == "string" then workflow = workflow.name end
  check_name(workflow, "wf:child")
  if opts ~= nil and type_(opts) ~= "table" then
    raw_error(sfmt("wf:child('%s', input, opts): opts must be a table like { id = \"charge-42\" }", workflow), 2)
  end
  local o = opts or {}
  for k in next_, o do
    if not (type_(k) == "string" and CHILD_OPTIONS[k]) then
      raw_error(sfmt("wf:child('%s'): unknown option %s; the options are id and timeout — check its "
        .. "spelling", workflow, type_(k) == "string" and sfmt("'%s'", ssub(k, 1, 64)) or tostring_(k)), 2)
    end
  end
  local json = encode_or_raise(input, sfmt("the input of child workflow '%s'", workflow), 2)
  local reply = command({ op = "child", workflow = workflow, input = json, id = o.id, timeout = o.timeout })
  local c = setmt({ id = reply.child, workflow = reply.workflow }, CHILD_MT)
  child_state[c] = { wf = self }
  return c
end

function child_methods.result(c, opts)
  local st = child_state[c]
  if st == nil then raw_error("c:result() needs a child handle from wf:child, called as c:result()", 2) end
  wf_check(st.wf, "c:result")
  if opts ~= nil and type_(opts) ~= "table" then
    raw_error("c:result() options must be a table like { timeout = \"1h\" }", 2)
  end
  local o = opts or {}
  for k in next_, o do
    if k ~= "timeout" then
      raw_error(sfmt("c:result(): unknown option %s; the only option is timeout, e.g. "
        .. "c:result({ timeout = \"1h\" })", type_(k) == "string" and sfmt("'%s'", ssub(k, 1, 64)) or tostring_(k)), 2)
    end
  end
  local timeout = o.timeout
  if st.reply == nil then
    st.asked = timeout
    st.reply = command({ op = "child_result", child = c.id, workflow = c.workflow, timeout = timeout })
  elseif st.asked ~= timeout then
    raw_error(sfmt("c:result() of child '%s' was called again with another timeout (%s, then %s); a "
      .. "child's outcome is read once and kept, so a second call returns the same — call it with "
      .. "the same options, or take a new handle with wf:child to wait again", c.id,
      tostring_(st.asked or "none"), tostring_(timeout or "none")), 2)
  end
  local reply = st.reply
  if reply.by == "completed" then return reply.result end
  raw_error(child_failure(c, reply), 2)
end

-- Branches that run at once, as child runs (docs/architecture.md, "Branches"): each runs on
-- a worker of its own (another Lambda invocation on AWS, another thread under lunaflow dev),
-- so their effects overlap; the parent waits for them in argument order, so its journal
-- reads the same whatever order they ended in. A failed branch raises after every branch
-- has settled: one failure, naming each branch that failed, with the results of the others.
local MAX_BRANCHES = 1000 -- per wf:map or wf:all_of call (runtime/core/bounds.py: MAX_BRANCHES)
local MAP_OPTIONS = { limit = true, timeout = true, id = true }

local function branches_failed(what, failed, results, total)
  local first = failed[1]
  local text = sfmt("%s: %d of %d branches failed; the first, %s, %s", what, #failed, total,
    tostring_(first.branch), tostring_(first.error))
  local f = setmt({ branches = what, failed = failed, results = results }, FAILURE_MT)
  step_failures[f] = text
  return f
end

-- Wait for one child, a failure becoming a record instead of a raise (a bug is raised).
local function settle_child(c, timeout)
  local ok, got = pcall(child_methods.result, c, timeout and { timeout = timeout } or nil)
  if ok then return true, got end
  if type_(got) == "table" and got.child ~= nil and step_failures[got] then return false, got end
  raw_error(got, 0)
end

function wf_methods.map(self, items, workflow, opts)
  wf_check(self, "wf:map")
  if type_(workflow) == "table" and type_(workflow.name) == "string" then workflow = workflow.name end
  check_name(workflow, "wf:map")
  if type_(items) ~= "table" or getmt(items) ~= nil then
    raw_error(sfmt("wf:map(items, '%s'): items must be an array of inputs, one child run each (got %s)",
      workflow, type_(items)), 2)
  end
  local n = 0
  for k in next_, items do
    if math.type(k) ~= "integer" or k < 1 then
      raw_error(sfmt("wf:map(items, '%s'): items must be an array (keys 1..n); it has the key %s",
        workflow, type_(k) == "string" and sfmt("'%s'", ssub(k, 1, 64)) or tostring_(k)), 2)
    end
    n = n + 1
  end
  for i = 1, n do
    if items[i] == nil then
      raw_error(sfmt("wf:map(items, '%s'): items must be an array (keys 1..n) with no holes; item %d is nil",
        workflow, i), 2)
    end
  end
  if n > MAX_BRANCHES then
    raw_error(sfmt("wf:map(items, '%s'): %d items, more than the %d branches one call may run; split the "
      .. "items over several calls, or map over runs that map (a tree of runs)", workflow, n, MAX_BRANCHES), 2)
  end
  if opts ~= nil and type_(opts) ~= "table" then
    raw_error(sfmt("wf:map(items, '%s', opts): opts must be a table like { limit = 10 }", workflow), 2)
  end
  local o = opts or {}
  for k in next_, o do
    if not (type_(k) == "string" and MAP_OPTIONS[k]) then
      raw_error(sfmt("wf:map(items, '%s'): unknown option %s; the options are limit, timeout and id — "
        .. "check its spelling", workflow, type_(k) == "string" and sfmt("'%s'", ssub(k, 1, 64)) or tostring_(k)), 2)
    end
  end
  local limit = o.limit == nil and MAX_BRANCHES or o.limit
  if math.type(limit) ~= "integer" or limit < 1 or limit > MAX_BRANCHES then
    raw_error(sfmt("wf:map(items, '%s'): limit must be a whole number from 1 to %d (got %s): how many "
      .. "branches run at once", workflow, MAX_BRANCHES, tostring_(o.limit)), 2)
  end
  if o.id ~= nil and type_(o.id) ~= "function" then
    raw_error(sfmt("wf:map(items, '%s'): id must be a function(item, i) returning each branch's run id "
      .. "(got %s)", workflow, type_(o.id)), 2)
  end
  -- Everything a branch will be started with is checked before the first starts, so a bad
  -- item journals nothing: its input (JSON-like, bounded) and its id.
  local ids = {}
  for i = 1, n do
    encode_or_raise(items[i], sfmt("the input of wf:map item %d (workflow '%s')", i, workflow), 2)
    if o.id ~= nil then
      local id = o.id(items[i], i)
      if type_(id) ~= "string" then
        raw_error(sfmt("wf:map(items, '%s'): the id function returned %s for item %d; it must return a "
          .. "run id string", workflow, type_(id), i), 2)
      end
      ids[i] = id
    end
  end
  local start_opts = function(i)
    if ids[i] == nil and o.timeout == nil then return nil end
    return { id = ids[i], timeout = o.timeout }
  end
  local children, results, failed = {}, {}, {}
  for i = 1, math.min(limit, n) do children[i] = wf_methods.child(self, workflow, items[i], start_opts(i)) end
  for i = 1, n do
    local ok, got = settle_child(children[i])
    if ok then
      results[i] = got
    else
      failed[#failed + 1] = { branch = i, child = got.child, status = got.status, message = got.message,
        error = tostring_(got) }
    end
    local nxt = i + limit
    if nxt <= n then children[nxt] = wf_methods.child(self, workflow, items[nxt], start_opts(nxt)) end
  end
  if #failed > 0 then
    raw_error(branches_failed(sfmt("wf:map over workflow '%s'", workflow), failed, results, n), 2)
  end
  return results
end

function wf_methods.all_of(self, branches, opts)
  wf_check(self, "wf:all_of")
  if type_(branches) ~= "table" or getmt(branches) ~= nil then
    raw_error(sfmt("wf:all_of(branches): branches must be a table of child handles from wf:child, keyed "
      .. "by name or position (got %s)", type_(branches)), 2)
  end
  if opts ~= nil and (type_(opts) ~= "table" or next_(opts, next_(opts)) ~= nil
      or (next_(opts) ~= nil and next_(opts) ~= "timeout")) then
    raw_error("wf:all_of(branches, opts): the only option is timeout, e.g. { timeout = \"1h\" }", 2)
  end
  local timeout = opts and opts.timeout
  local keys = {}
  for k, c in next_, branches do
    if type_(k) ~= "string" and math.type(k) ~= "integer" then
      raw_error(sfmt("wf:all_of(branches): a branch's key must be a name or a position (got %s)", type_(k)), 2)
    end
    if type_(c) ~= "table" or child_state[c] == nil then
      raw_error(sfmt("wf:all_of(branches): branch %s is %s, not a child handle; start each branch with "
        .. "wf:child(workflow, input) and pass the handles", type_(k) == "string" and sfmt("'%s'", ssub(k, 1, 64))
        or tostring_(k), type_(c) == "table" and "a table" or type_(c)), 2)
    end
    keys[#keys + 1] = k
  end
  if #keys > MAX_BRANCHES then
    raw_error(sfmt("wf:all_of(branches): %d branches, more than the %d one call may wait for; split them",
      #keys, MAX_BRANCHES), 2)
  end
  -- Positions first, in order, then names in byte order: the order of the waits, so of the
  -- journal, is the same on every replay.
  table.sort(keys, function(a, b)
    if type_(a) ~= type_(b) then return type_(a) == "number" end
    return a < b
  end)
  local results, failed = {}, {}
  for _, k in ipairs(keys) do
    local ok, got = settle_child(branches[k], timeout)
    if ok then
      results[k] = got
    else
      failed[#failed + 1] = { branch = k, child = got.child, status = got.status, message = got.message,
        error = tostring_(got) }
    end
  end
  if #failed > 0 then raw_error(branches_failed("wf:all_of", failed, results, #keys), 2) end
  return results
end
end

-- Continue-as-new: the generation's journal is closed and the function starts again from the
-- top with `state` as its input, under the same run id. The engine never resumes this
-- coroutine, so `return wf:continue_as_new(state)` reads as what happens. The state is
-- encoded here so a value that is not JSON-like is refused at the user's line, naming it.
function wf_methods.continue_as_new(self, state)
  wf_check(self, "wf:continue_as_new")
  local json = encode_or_raise(state, "the input of wf:continue_as_new", 2)
  command({ op = "continue", input = json })
  raw_error("wf:continue_as_new resumed; the engine starts a fresh generation instead", 2)
end

-- `wf:awiat(...)` would otherwise fail with Lua's "attempt to call a nil value (method
-- 'awiat')": name the nearest method instead, at the user's line.
local WF_METHODS = { "step", "sleep", "await", "race", "all", "version", "set", "child", "on_cancel",
  "continue_as_new", "map", "all_of" }

local function edit_distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local row = { [0] = i }
    for j = 1, #b do
      local cost = sbyte(a, i) == sbyte(b, j) and 0 or 1
      row[j] = math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = row
  end
  return prev[#b]
end

local function no_such_wf_member(k)
  local what = type_(k) == "string" and sfmt("'%s'", ssub(k, 1, 64)) or tostring_(type_(k) == "number" and k or type_(k))
  local best, best_d
  if type_(k) == "string" and #k <= 64 then
    for _, m in ipairs(WF_METHODS) do
      local d = edit_distance(k, m)
      if best_d == nil or d < best_d then best, best_d = m, d end
    end
  end
  local hint = (best_d ~= nil and best_d <= math.max(1, #best // 2)) and sfmt("did you mean wf:%s? ", best) or ""
  -- Level 3: this function, the __index metamethod, then the user's line.
  raw_error(sfmt("wf has no method or field %s; %swf has the methods step, sleep, await, race, all, "
    .. "version, set, child, map, all_of, on_cancel and continue_as_new, and the fields id, workflow and "
    .. "step_id", what, hint), 3)
end

local function new_wf(run_id, workflow)
  local fields = { id = run_id, workflow = workflow }
  local wf
  wf = setmt({}, {
    __metatable = false,
    __index = function(_, k)
      if k == "step_id" then
        if ctx.mode == "body" and ctx.wf == wf then return ctx.step_id end
        raw_error("wf.step_id is only available inside a step body", 2)
      end
      local v = fields[k]
      if v ~= nil then return v end
      v = wf_methods[k]
      if v == nil then no_such_wf_member(k) end
      return v
    end,
    __newindex = function(_, k) raw_error("wf is read-only (tried to set wf." .. tostring_(k) .. ")", 2) end,
  })
  return wf
end

---------------------------------------------------------------------------------------
-- The environment user code runs in.
---------------------------------------------------------------------------------------
local function copy(t, except)
  local out = {}
  for k, v in next_, t do if not (except and except[k]) then out[k] = v end end
  return out
end

local sb_string = copy(string)
local sb_math = copy(math, { randomseed = true })
sb_math.random = sb_random
sb_math.randomseed = function() raw_error("math.randomseed is refused: the platform seeds randomness "
  .. "so replay stays deterministic; call math.random without seeding", 2) end

local MAX_DATE_FORMAT = 4096
local DATE_REFUSED = "os.date is refused in run code: its result depends on when replay happens; "
  .. "format os.time() yourself, or call os.date in a handler"

local function sb_date(fmt, t)
  if in_run_code() then raise_at_user(DATE_REFUSED) end
  -- strftime works through the format in C, up to a tenth of a microsecond a byte.
  if type_(fmt) == "string" and #fmt > MAX_DATE_FORMAT then
    raw_error(sfmt("os.date format is %d bytes, over the limit of %d; format fewer fields "
      .. "per call and join the results", #fmt, MAX_DATE_FORMAT), 2)
  end
  return os.date(fmt or "%c", t or call_host("now"))
end

local sb_os = { time = sb_time, clock = sb_clock, difftime = os.difftime }

-- os.date refused in run code names the user's line. `return os.date(...)` is a tail call:
-- by the time os.date runs, the caller's frame is gone and no level of error() names it.
-- So `date` is not a raw field of `os` but answered by __index, which runs in the frame
-- that looks it up; in run code the answer is a refusal that carries that line. pairs(os)
-- still lists `date`, in a fixed order (replay walks it the same way). The metatable is
-- left unprotected, as `os` had none: replacing it only changes the user's own lookups.
local function date_refused_where_looked_up(os_table)
  setmt(os_table, {
    __index = function(_, k)
      if k ~= "date" then return nil end
      if not in_run_code() then return sb_date end
      local info = getinfo(2, "Sl")
      local where = ""
      if info and info.currentline > 0 and not ENGINE_SOURCES[info.source] then
        where = sfmt("%s:%d: ", info.short_src, info.currentline)
      end
      return function(...)
        if in_run_code() then raw_error(where .. DATE_REFUSED, 0) end
        return sb_date(...)
      end
    end,
    __pairs = function(t)
      local keys = { "date" }
      for k in next_, t do keys[#keys + 1] = k end
      tsort(keys)
      local i = 0
      return function()
        i = i + 1
        local k = keys[i]
        if k ~= nil then return k, t[k] end
      end, t, nil
    end,
  })
  return os_table
end
date_refused_where_looked_up(sb_os)

local sb_json = {
  encode = function(v)
    local s, problem = encode(v, "value")
    if not s then raw_error("json.encode: the value holds " .. problem, 2) end
    return s
  end,
  parse = function(s)
    if type_(s) ~= "string" then raw_error("json.parse expects a string (got " .. type_(s) .. ")", 2) end
    if not utf8len(s) then raw_error("json.parse: the text is not valid UTF-8", 2) end
    return call_host("json_parse", s)
  end,
}

local function log_fn(level)
  return function(msg, fields)
    local json = "null"
    if fields ~= nil then
      local s, problem = encode(fields, "fields")
      json = s or encode("(fields not logged: " .. problem .. ")")
    end
    call_host("log", level, safe_text(msg), json, ctx.mode)
  end
end

local sb_log = { info = log_fn("info"), warn = log_fn("warn"), error = log_fn("error") }

local base = {
  assert = assert, error = raw_error, ipairs = ipairs, next = sb_next, pairs = sb_pairs,
  pcall = sb_pcall, xpcall = sb_xpcall, rawequal = rawequal, rawget = rawget_, rawlen = rawlen,
  rawset = rawset_, select = select_, getmetatable = getmt,
  setmetatable = function(t, mt)
    -- Finalizers run with hooks off, where no budget could stop them.
    if type_(mt) == "table" and rawget_(mt, "__gc") ~= nil then
      raw_error("setmetatable: __gc finalizers are not allowed in lunaflow scripts; release "
        .. "resources explicitly instead", 2)
    end
    local current = type_(t) == "table" and real_getmt(t) or nil
    if current ~= nil and rawget_(current, "__metatable") ~= nil then
      raw_error("cannot change a protected metatable", 2)
    end
    local r = setmt(t, mt)
    return r
  end,
  tonumber = tonumber, tostring = tostring_, type = type_, _VERSION = _VERSION,
  print = function(...)
    local parts = {}
    for i = 1, select_("#", ...) do parts[i] = tostring_((select_(i, ...))) end
    call_host("log", "info", safe_text(tconcat(parts, "\t")), "null", ctx.mode)
  end,
  string = sb_string, table = copy(table), math = sb_math, utf8 = copy(utf8),
  os = sb_os, coroutine = sb_coroutine,
  json = sb_json, log = sb_log,
  uuid = { v4 = sb_uuid },
  workflow = sb_workflow, workflows = sb_workflows,
}

---------------------------------------------------------------------------------------
-- http, crypto, Jwt: for handlers and objects; absent in run code. Binary strings cross
-- to the host hex-encoded, since every string the host receives must be UTF-8.
---------------------------------------------------------------------------------------
local function tohex(s) return (sgsub(s, ".", function(c) return sfmt("%02x", sbyte(c)) end)) end

local function outside_run_code(what)
  if in_run_code() then
    raw_error(what .. " is absent in run code: reach the network, clocks and keys from an object "
      .. "called inside wf:step, so the step records what it returned", 3)
  end
end

local function need_string(v, what)
  if type_(v) ~= "string" then raw_error(sfmt("%s expects a string (got %s)", what, type_(v)), 3) end
end

local sb_crypto = {
  sha256 = function(s) outside_run_code("crypto") need_string(s, "crypto.sha256") return call_host("crypto_sha256", tohex(s)) end,
  hmac_sha256 = function(key, s)
    outside_run_code("crypto") need_string(key, "crypto.hmac_sha256 key") need_string(s, "crypto.hmac_sha256")
    return call_host("crypto_hmac_sha256", tohex(key), tohex(s))
  end,
  random_bytes = function(n)
    outside_run_code("crypto")
    if mtype(n) ~= "integer" or n < 0 or n > 65536 then raw_error("crypto.random_bytes expects a whole number from 0 to 65536", 2) end
    return call_host("crypto_random_bytes", n)
  end,
  hex = function(s) outside_run_code("crypto") need_string(s, "crypto.hex") return tohex(s) end,
  base64_encode = function(s) outside_run_code("crypto") need_string(s, "crypto.base64_encode") return call_host("crypto_b64encode", tohex(s)) end,
  base64_decode = function(s) outside_run_code("crypto") need_string(s, "crypto.base64_decode") return call_host("crypto_b64decode", safe_text(s)) end,
}

local sb_jwt = {
  sign = function(claims, key, opts)
    outside_run_code("Jwt")
    need_string(key, "Jwt.sign key")
    local alg = opts and opts.alg or "HS256"
    return call_host("jwt_sign", encode_or_raise(claims, "Jwt.sign claims", 2), tohex(key), tostring_(alg))
  end,
  verify = function(token, key)
    outside_run_code("Jwt")
    need_string(token, "Jwt.verify token") need_string(key, "Jwt.verify key")
    local claims, err = call_host("jwt_verify", safe_text(token), tohex(key))
    return claims, err
  end,
}

local function http_request(req)
  outside_run_code("http")
  if type_(req) ~= "table" then raw_error("http.request expects a table like { method = \"GET\", url = \"https://...\" }", 2) end
  local body = req.body
  if body ~= nil and type_(body) ~= "string" then raw_error("http.request: body must be a string", 2) end
  local spec = { method = req.method or "GET", url = req.url, headers = req.headers or {}, timeout = req.timeout }
  local json = encode_or_raise(spec, "http.request options", 2)
  return call_host("http_request", json, body and tohex(body) or nil)
end

local sb_http = {
  request = http_request,
  get = function(url, opts)
    local o = opts or {}
    return http_request({ method = "GET", url = url, headers = o.headers, timeout = o.timeout })
  end,
  post = function(url, body, opts)
    local o = opts or {}
    return http_request({ method = "POST", url = url, body = body, headers = o.headers, timeout = o.timeout })
  end,
}

-- Absent in run code, inside step bodies too (the seed's determinism table).
local absent_in_run = { http = true, crypto = true, Jwt = true }
local extras = { http = sb_http, crypto = sb_crypto, Jwt = sb_jwt }

-- The platform's tables are shared by every script and run of the project: like handles,
-- their metatables are protected (setmetatable refuses, getmetatable answers false).
for _, t in ipairs({ sb_json, sb_log, base.uuid, sb_crypto, sb_http, sb_jwt }) do
  setmt(t, { __metatable = false })
end

local function script_env()
  local env = {}
  env._G = env
  return setmt(env, { __index = function(_, k)
    if absent_in_run[k] and in_run_code() then return nil end
    local v = base[k]
    if v == nil then v = extras[k] end
    return v
  end })
end

local function sb_load(chunk, name, mode, env)
  if mode ~= nil and mode ~= "t" then
    raw_error("load: only text chunks are allowed (mode \"t\"); binary chunks are refused", 2)
  end
  return raw_load(chunk, name, "t", env or script_env())
end
base.load = sb_load

-- require: project modules only, from sources the host loaded with the project.
local modules, loading = {}, {}
base.require = function(name)
  if type_(name) ~= "string" or not name:match("^[%w_]+[%w_%.]*$") or name:find("%.%.") then
    raw_error(sfmt("require %q: module names are dotted project paths like \"lib.money\"", tostring_(name)), 2)
  end
  if modules[name] ~= nil then return modules[name] end
  if loading[name] then raw_error("require \"" .. name .. "\": a module cannot require itself while loading", 2) end
  local source, path = call_host("module_source", name)
  if not source then
    raw_error(sfmt("require \"%s\": no module %s in this project; modules are project files "
      .. "reached as dotted paths (\"lib.money\" is lib/money.lua)", name, path), 2)
  end
  local fn, err = raw_load(source, "@" .. path, "t", script_env())
  if not fn then raw_error(err, 0) end
  loading[name] = true
  local ok, result = raw_pcall(fn, name)
  loading[name] = nil
  check_killed()
  if not ok then raw_error(result, 0) end
  if result == nil then result = true end
  modules[name] = result
  return result
end

-- Declarations of services (their local backends come from the host's service table).

-- On AWS a database's name is Aurora PostgreSQL's DatabaseName: 1-63 letters, digits or
-- underscores, starting with a letter. Held wherever a project loads, so a name that would
-- fail the deploy fails the first local test instead.
local function check_database_name(name)
  if #name <= 63 and name:match("^[A-Za-z][A-Za-z0-9_]*$") then return end
  local fix = name:gsub("[^A-Za-z0-9_]", "_")
  if not fix:match("^[A-Za-z]") then fix = "db_" .. fix end
  raw_error(sfmt("database name '%s' is not allowed: on AWS it is Aurora PostgreSQL's DatabaseName, "
    .. "1-63 letters, digits or underscores starting with a letter; name it \"%s\"", name, fix:sub(1, 63)), 3)
end

base.database = function(name)
  check_name(name, "database")
  check_database_name(name)
  must_be_top_level("database '" .. name .. "'")
  return function(opts)
    if type_(opts) ~= "table" then
      raw_error(sfmt("database \"%s\" needs options: database \"%s\" { migrations = \"migrations/%s\" }", name, name, name), 2)
    end
    -- Where it is declared: its migrations apply later, once the code is accepted, and a
    -- failure then still names this line.
    local info = getinfo(2, "Sl")
    local where = info and info.currentline > 0 and sfmt("%s:%d", info.short_src, info.currentline) or ctx.script
    call_host("declare", "database", name, encode_or_raise(opts, "database options", 2), where)
    return service("database", name, { "exec", "query", "first" })
  end
end

-- schedule "name" { cron = "0 3 * * *", workflow = "report", ... }: checked by the host
-- (runtime/engine/schedules.py), fired by the platform; the declaration returns nothing.
base.schedule = function(name)
  check_name(name, "schedule")
  must_be_top_level("schedule '" .. name .. "'")
  return function(opts)
    if type_(opts) ~= "table" then
      raw_error(sfmt("schedule \"%s\" needs options: schedule \"%s\" { cron = \"0 3 * * *\", workflow = \"report\" }", name, name), 2)
    end
    declare("schedule", name, "schedule '" .. name .. "'")
    local info = getinfo(2, "Sl")
    local where = info and info.currentline > 0 and sfmt("%s:%d", info.short_src, info.currentline) or ctx.script
    call_host("declare", "schedule", name, encode_or_raise(opts, "schedule options", 2), where)
  end
end

local object_classes = {}
base.object = function(name)
  check_name(name, "object")
  must_be_top_level("object '" .. name .. "'")
  return function(methods)
    if type_(methods) ~= "table" then raw_error(sfmt("object \"%s\" needs a table of methods", name), 2) end
    declare("object", name, "object '" .. name .. "'")
    object_classes[name] = methods
    call_host("declare", "object", name, "null")
  end
end

base.objects = function(name)
  check_name(name, "objects")
  return setmt({}, {
    __metatable = false,
    __call = function(_, key)
      if type_(key) ~= "string" or key == "" then raw_error(sfmt("objects \"%s\": a key must be a non-empty string", name), 2) end
      return setmt({}, { __metatable = false, __index = function(_, method)
        return function(_, ...)
          effect_guard(sfmt("%s:%s", name, method))
          local json, problem = encode_list(pack(...))
          if not json then raw_error(holds(sfmt("%s(%q):%s arguments", name, key, method), problem), 2) end
          local r = call_host("object_call", name, key, method, json)
          return unpack(r, 1, r.n)
        end
      end })
    end,
  })
end

base.kv = function(ns)
  check_name(ns, "kv")
  return service("kv", ns, { "get", "put", "delete", "list" })
end

base.queue = function(name)
  check_name(name, "queue")
  return service("queue", name, { "send" })
end

base.secret = function(name)
  check_name(name, "secret")
  if ctx.mode == "load" then
    raw_error(sfmt("secret \"%s\" was read at a script's top level; read secrets where they are used, "
      .. "in a handler or in run code", name), 2)
  end
  return call_host("secret", name)
end

local handlers = { fetch = nil, queue = {} }
base.on = function(event)
  must_be_top_level("on \"" .. tostring_(event) .. "\"")
  if event == "fetch" then
    return function(fn)
      if type_(fn) ~= "function" then raw_error("on \"fetch\" needs a function(request)", 2) end
      declare("fetch", "fetch", "the fetch handler")
      handlers.fetch = fn
    end
  elseif event == "queue" then
    return function(qname, fn)
      check_name(qname, "on \"queue\"")
      if type_(fn) ~= "function" then raw_error("on \"queue\" (name, fn) needs a function(message)", 2) end
      declare("queue", qname, "the handler of queue '" .. qname .. "'")
      handlers.queue[qname] = fn
    end
  end
  raw_error(sfmt("on %q: events are \"fetch\" and \"queue\"", tostring_(event)), 2)
end

---------------------------------------------------------------------------------------
-- The engine table the host drives.
---------------------------------------------------------------------------------------
local engine = {}

local function finish_call(ok, err)
  local killed = budget.killed
  budget.killed, budget.deadline = nil, nil
  if killed then return false, killed end
  if ok then return true, nil end
  return false, error_text(err)
end

function engine.set_extras(name, value) extras[name] = value end

-- Load one script's top level. Returns true, or false and the error.
function engine.load_script(name, source, limit)
  local fn, err = raw_load(source, "@" .. name, "t", script_env())
  if not fn then return false, safe_text(err) end
  local saved = ctx
  ctx = { mode = "load", script = name }
  begin_call(limit)
  local co = raw_create(fn)
  guard(co)
  depth = depth + 1
  local ok, e = raw_resume(co)
  depth = depth - 1
  if ok and raw_status(co) == "suspended" then ok, e = false, name .. ": a script's top level cannot yield" end
  sethook(co)
  ctx = saved
  return finish_call(ok, e)
end

function engine.declarations()
  local out = {}
  for kind, names in next_, declared do
    for n, script in next_, names do out[#out + 1] = { kind = kind, name = n, script = script } end
  end
  return out
end

function engine.has_workflow(name) return workflow_fns[name] ~= nil end

function engine.workflow_timeout(name) return workflow_timeouts[name] end
function engine.workflow_collect(name) return flowlib.collects[name] end

-- Create the coroutine of a run. `input` is a Lua value already built by the host.
-- The gate of a workflow with flow control: its keys and priority from the input, then
-- one engine command; the function runs once the engine lets the run through.
function flowlib.gated(fn, flow, workflow)
  return function(wf, input)
    if flow.collect then
      -- Wait for the collection to close; the function runs on what was collected.
      local r = command({ op = "collect" })
      if r.collected then input = r.input end
    end
    if #flow.slots == 0 and flow.rate == nil and flow.priority == nil then return fn(wf, input) end
    local slots = {}
    for i, l in ipairs(flow.slots) do
      local key = nil
      if l.key then key = l.key(input) end
      slots[i] = { limit = l.limit, scope = l.scope, key = key, keyed = l.key ~= nil }
    end
    local rate = nil
    if flow.rate then
      rate = { limit = flow.rate.limit, key = flow.rate.key and flow.rate.key(input) or nil }
    end
    local priority = flow.priority
    if type_(priority) == "function" then priority = priority(input) end
    command({ op = "gate", workflow = workflow, slots = slots, rate = rate, priority = priority })
    return fn(wf, input)
  end
end

function engine.new_run(run_id, workflow, input)
  local fn = workflow_fns[workflow]
  if flowlib.workflows[workflow] then fn = flowlib.gated(fn, flowlib.workflows[workflow], workflow) end
  local wf = new_wf(run_id, workflow)
  local co = raw_create(function()
    local r = pack(raw_xpcall(fn, function(e)
      return { message = error_text(e), traceback = user_traceback(traceback(nil, 2)) }
    end, wf, input))
    -- Encoded here, where the hook still runs: a result can take as long as any code.
    if r[1] then r.json, r.problem = encode(r[2], "result") end
    return r
  end)
  return { co = co, wf = wf, run = run_id, workflow = workflow }
end

-- A cancelled run's cleanup: its coroutine becomes the cancel handler's, driven as the
-- workflow function was (the function itself is left where the cancel found it). False
-- when the run registered no handler.
function engine.begin_cleanup(session)
  local fn = cleanups[session.wf]
  if fn == nil then return false end
  session.co = raw_create(function()
    local r = pack(raw_xpcall(fn, function(e)
      return { message = error_text(e), traceback = user_traceback(traceback(nil, 2)) }
    end))
    if r[1] then r.json = "null" end -- what a handler returns is not kept
    return r
  end)
  return true
end

-- Resume a run's coroutine with `reply`. Returns flat values, so the host reads them in
-- one crossing instead of a field at a time:
--   "step", name, retries, backoff, timeout, fn, catch, max_backoff, jitter   wf:step
--   "command", cmd                                another engine command (a table)
--   "returned", json                              the function returned (JSON of its first value)
--   "oversize", size                              it returned a value whose JSON is over `max_bytes`
--   "error", message, traceback
function engine.drive(session, reply, limit, max_bytes)
  local co = session.co
  local saved = ctx
  ctx = { mode = "run", run = session.run, wf = session.wf, workflow = session.workflow }
  begin_call(limit)
  guard(co)
  depth = depth + 1
  local ok, a, b = raw_resume(co, reply)
  depth = depth - 1
  sethook(co)
  ctx = saved
  local killed = budget.killed
  budget.killed = nil
  if killed then return "error", killed end
  if not ok then return "error", error_text(a) end
  if raw_status(co) == "suspended" then
    if a == ENGINE and type_(b) == "table" then
      if b.op == "step" then
        return "step", b.name, b.retries, b.backoff, b.timeout, b.fn, b.catch, b.max_backoff, b.jitter,
          b.rate_limit, b.rate_key
      end
      return "command", b
    end
    return "error", "the workflow function yielded outside a coroutine of its own; "
      .. "coroutine.yield belongs inside coroutine.create/wrap"
  end
  local outcome = a
  if not outcome[1] then
    local e = outcome[2]
    -- Memory errors skip the message handler, so the error may be a bare string.
    if type_(e) ~= "table" then return "error", error_text(e) end
    return "error", e.message, e.traceback
  end
  if not outcome.json then
    return "error", sfmt("workflow '%s' returned a value that holds %s; %s",
      session.workflow, outcome.problem, VALUE_RULE)
  end
  -- A value of megabytes is refused here, before its text is copied into Python, parsed
  -- and measured there (the host gives a bound no value within the limit reaches).
  if max_bytes and #outcome.json > max_bytes then return "oversize", #outcome.json end
  return "returned", outcome.json
end

-- Run a step body to completion. Returns true and the JSON array of its values, or false
-- and the error; values over `max_bytes` come back as false, nil, false, nil and their size
-- (the host words the refusal). `seed1`, `seed2` seed math.random from the step id, so a
-- body run again after a crash draws the same numbers.
function engine.run_body(session, fn, name, step_id, now_s, seed1, seed2, timeout_msg, limit, deadline,
    max_bytes)
  local saved = ctx
  ctx = { mode = "body", run = session.run, wf = session.wf, workflow = session.workflow,
    step = name, step_id = step_id, now_s = now_s }
  raw_randomseed(seed1, seed2)
  begin_call(limit, deadline, timeout_msg)
  -- The values are encoded inside, where the hook still runs.
  local count = 0
  local co = raw_create(function()
    local values = pack(fn())
    count = values.n
    return encode_list(values)
  end)
  guard(co)
  depth = depth + 1
  local ok, json, problem = raw_resume(co)
  depth = depth - 1
  if ok and raw_status(co) == "suspended" then
    ok, json = false, sfmt("step '%s' yielded; a step body runs to completion (coroutine.yield belongs "
      .. "inside coroutine.create/wrap)", name)
  end
  sethook(co)
  ctx = saved
  raw_randomseed(seed2, seed1 + 1)
  -- An error table with retry = false ends the step's attempts (the third value).
  -- A killed body (timeout, budget) is never that, whatever it raised.
  local no_retry = not ok and not budget.killed and type_(json) == "table" and rawget_(json, "retry") == false
  -- retry_after ("30s", or seconds): the third party said "slow down"; the engine waits
  -- that long without spending an attempt (the fourth value, checked by the host).
  local retry_after = nil
  if not ok and not budget.killed and type_(json) == "table" then
    local ra = rawget_(json, "retry_after")
    if type_(ra) == "string" or type_(ra) == "number" then retry_after = ra end
  end
  local good, err = finish_call(ok, json)
  if not good then return false, err, no_retry, retry_after end
  if not json then return false, holds(sfmt("the result of step '%s'", name), problem), false end
  -- Values over the limit are measured here, before their text (tens of megabytes at most,
  -- within the state's memory) is copied into Python, parsed and measured there: three more
  -- copies of it. Their own bytes: the array's brackets and commas are not theirs.
  local size = #json - 2 - (count > 1 and count - 1 or 0)
  if size > max_bytes then return false, nil, false, nil, size end
  return true, json, false
end

-- Run `fn(...)` as handler code (a fetch or queue handler, an object method, a Lua test or a
-- stub), in its own guarded coroutine. Nested in another call (an object called from a step
-- body) it shares that call's budget. Returns true and, packed, what `finish` made of the
-- xpcall outcome (whose results are [2..n]), or false, the error and its traceback.
local function run_handler_code(fn, ctx_fields, limit, finish, ...)
  local saved = ctx
  ctx = ctx_fields
  local outer = depth > 0
  if not outer then begin_call(limit) end
  depth = depth + 1
  local args = pack(...)
  local co = raw_create(function()
    local r = pack(raw_xpcall(fn, function(e)
      return { message = error_text(e), traceback = user_traceback(traceback(nil, 2)) }
    end, unpack(args, 1, args.n)))
    -- `finish` encodes what the caller hands back, here where the hook still runs.
    if r[1] then r.done = pack(finish(r)) end
    return r
  end)
  guard(co)
  local ok, r = raw_resume(co)
  sethook(co)
  depth = depth - 1
  ctx = saved
  local killed = budget.killed
  if killed then
    if not outer then budget.killed = nil end
    return false, killed, nil
  end
  if not ok then return false, error_text(r), nil end
  if raw_status(co) == "suspended" then
    return false, "the code yielded outside a coroutine of its own (coroutine.yield belongs inside coroutine.create/wrap)", nil
  end
  if not r[1] then
    if type_(r[2]) ~= "table" then return false, error_text(r[2]), nil end
    return false, r[2].message, r[2].traceback
  end
  return true, r.done, nil
end

-- What run_handler_code's callers hand back: the results (r[2..n]) as one JSON array, or
-- the first result alone.
local function results_json(r) return encode_list(r, 2) end
local function response_json(r) return encode(r[2], "response") end

-- Call a function user code handed over (a Lua test, a stub). Returns true, "json of its
-- results" or false, error, traceback.
function engine.call_function(fn, args, limit)
  local ok, out, tb = run_handler_code(fn, { mode = "handler" }, limit, results_json, unpack(args, 1, args.n))
  if not ok then return false, out, tb end
  local json, problem = out[1], out[2]
  if not json then return false, holds("the returned values", problem), nil end
  return true, json, nil
end

-- Call the fetch handler (or a queue handler) with a request table built by the host.
function engine.call_handler(kind, name, arg, limit)
  local fn = kind == "fetch" and handlers.fetch or handlers.queue[name]
  if not fn then return { ok = false, error = "no handler" } end
  local ok, out, tb = run_handler_code(fn, { mode = "handler" }, limit, response_json, arg)
  if not ok then return { ok = false, error = out, traceback = tb } end
  local json, problem = out[1], out[2]
  if not json then return { ok = false, error = "the handler returned a value that holds " .. problem } end
  return { ok = true, json = json }
end

-- Run an object's method. `state` is the key's persisted state (a Lua table). Returns
-- true, "[...results]", "{...state}" or false, error. It answers with plain values, not a
-- table: it is called from Python code that itself runs inside a Lua coroutine (a step
-- body calling an object), where lupa 2.8 misreads table fields (it reads the
-- coroutine's stack), while calling a function bound beforehand works.
function engine.call_object(cls, key, method, state, args, limit)
  local methods = object_classes[cls]
  if not methods then return false, sfmt("no object \"%s\" is declared in this project", cls) end
  local fn = rawget_(methods, method)
  if type_(fn) ~= "function" then
    return false, sfmt("object \"%s\" has no method '%s'", cls, method)
  end
  local self = { key = key, state = state }
  local function finish(r)
    local json, problem = encode_list(r, 2)
    if not json then return nil, holds(sfmt("the result of %s(%q):%s", cls, key, method), problem) end
    local st, sproblem = encode(self.state, "state")
    if not st then return nil, sfmt("%s(%q).state holds %s; %s", cls, key, sproblem, VALUE_RULE) end
    return json, st
  end
  local ok, out = run_handler_code(fn, { mode = "handler", object = cls, key = key }, limit,
    finish, self, unpack(args, 1, args.n))
  if not ok then return false, out end
  if not out[1] then return false, out[2] end
  return true, out[1], out[2]
end

function engine.has_handler(kind, name)
  if kind == "fetch" then return handlers.fetch ~= nil end
  return handlers.queue[name] ~= nil
end

engine.encode = encode

-- The host calls each engine function through its entry: the memory limit is armed while
-- Lua runs and lifted before anything goes back to Python (lupa allocates in Lua to hand a
-- table over), and whatever the function raises is caught here, so Python always gets
-- (ok, ...) with the limit lifted. The nesting depth and the context are put back as they
-- were, whatever the function left.
local function leave(outer_depth, outer_ctx, ...)
  depth, ctx = outer_depth, outer_ctx
  host_lift()
  return ...
end
local entries = {}
for name, f in next_, engine do
  if name ~= "encode" then
    entries[name] = function(...)
      local outer_depth, outer_ctx = depth, ctx
      host_arm()
      return leave(outer_depth, outer_ctx, raw_pcall(f, ...))
    end
  end
end
return engine, entries

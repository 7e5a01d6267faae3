-- Lua 5.4's pattern matcher (lstrlib.c), ported line by line to Lua, and the router that
-- decides, call by call, whether the C matcher or this port runs.
--
-- Why it exists: the C matcher runs where the count hook never fires, so a backtracking
-- pattern (`("a"):rep(40):find(("a*"):rep(20) .. "b")`) or a quadratic search over a long
-- subject would hold a worker past every instruction budget and step timeout. The port
-- is ordinary Lua, so the hook reaches it. It is slower, so the router keeps the C
-- matcher for every call whose worst case is small (most calls: short subjects, few
-- quantifiers) and whose arguments cannot raise an error (C errors would name the
-- engine's line instead of the caller's).
--
-- The port must be indistinguishable from C: same results, same errors, same edge cases
-- (reading past the end of a pattern or subject yields "\0", as C reads the terminator).
-- tests/reliability_security/test_lua_patterns.py checks that differentially.
--
-- The chunk takes an optional `opts` table:
--   opts.error(msg)                      raises a matcher error (default: error(msg, 0))
--   opts.argerror(arg, fname, extramsg)  raises an argument error
--   opts.skip                            C functions (set by the router) whose frames an
--                                        error's position should look past
--   opts.spent(units)                    told the worst-case work of each call the router
--                                        sends to C (so the caller can read its clocks)
local opts = ... or {}

local sbyte, ssub, schar, sfmt, srep = string.byte, string.sub, string.char, string.format, string.rep
local c_find, c_match, c_gmatch, c_gsub = string.find, string.match, string.gmatch, string.gsub
local tconcat, unpack = table.concat, table.unpack
local type_, tostring_, tonumber_, select_, rawget_ = type, tostring, tonumber, select, rawget
local tointeger, mtype = math.tointeger, math.type
local raw_getmt = (debug and debug.getmetatable) or getmetatable

local raise = opts.error or function(msg) error(msg, 0) end
local spent = opts.spent or function() end
local argerror = opts.argerror or function(arg, fname, extramsg)
  error(sfmt("bad argument #%d to '%s' (%s)", arg, fname, extramsg), 0)
end

local L_ESC, MAXCCALLS, MAXCAPTURES = 37, 200, 32
local CAP_UNFINISHED, CAP_POSITION = -1, -2
local B_LPAREN, B_RPAREN, B_DOLLAR, B_LBRACKET, B_RBRACKET = 40, 41, 36, 91, 93
local B_CARET, B_DOT, B_STAR, B_PLUS, B_MINUS, B_QUESTION = 94, 46, 42, 43, 45, 63
local B_b, B_f, B_0, B_1, B_9 = 98, 102, 48, 49, 57

---------------------------------------------------------------------------------------
-- Character classes, read from the C matcher itself so that they follow the same
-- ctype tables (and locale) as string.find.
---------------------------------------------------------------------------------------
local CLASS = {}
do
  local bytes = {}
  for b = 0, 255 do bytes[b + 1] = b end
  local all = schar(unpack(bytes))
  for letter in c_gmatch("acdglpsuwxz", ".") do -- z: "\0", deprecated but still in 5.4
    local lower, upper = {}, {}
    for b = 0, 255 do lower[b], upper[b] = false, true end
    local members = c_gsub(all, "%" .. letter, function(ch) local b = sbyte(ch); lower[b], upper[b] = true, false end)
    local _ = members
    CLASS[sbyte(letter)] = lower
    CLASS[sbyte(letter) - 32] = upper
  end
end

local function match_class(c, cl)
  local set = CLASS[cl]
  if set then return set[c] end
  return cl == c
end

---------------------------------------------------------------------------------------
-- The matcher. `ms` holds one call's state; positions are 1-based, `src_end` and `p_end`
-- are one past the last byte, as in C.
---------------------------------------------------------------------------------------
local function pbyte(ms, i) return ms.pb[i] or 0 end

-- What a pattern position always gives, kept per pattern (see `compiled`): where the
-- class at p ends, and per bracket class which bytes it matches. Errors are not kept:
-- they are raised again each time the matcher reaches them, as C raises them.
local class_end_of

local function class_end(ms, p)
  local known = ms.ce[p]
  if known then return known end
  local e = class_end_of(ms, p)
  ms.ce[p] = e
  return e
end

class_end_of = function(ms, p)
  local c = pbyte(ms, p)
  p = p + 1
  if c == L_ESC then
    if p == ms.p_end then raise("malformed pattern (ends with '%')") end
    return p + 1
  elseif c == B_LBRACKET then
    if pbyte(ms, p) == B_CARET then p = p + 1 end
    repeat
      if p == ms.p_end then raise("malformed pattern (missing ']')") end
      local cc = pbyte(ms, p)
      p = p + 1
      if cc == L_ESC and p < ms.p_end then p = p + 1 end
    until pbyte(ms, p) == B_RBRACKET
    return p + 1
  end
  return p
end

local function match_bracket_class(ms, c, p, ec)
  local sig = true
  if pbyte(ms, p + 1) == B_CARET then
    sig = false
    p = p + 1
  end
  while true do
    p = p + 1
    if p >= ec then break end
    local pc = pbyte(ms, p)
    if pc == L_ESC then
      p = p + 1
      if match_class(c, pbyte(ms, p)) then return sig end
    elseif pbyte(ms, p + 1) == B_MINUS and p + 2 < ec then
      p = p + 2
      if pc <= c and c <= pbyte(ms, p) then return sig end
    elseif pc == c then
      return sig
    end
  end
  return not sig
end

local function single_match(ms, s, p, ep)
  if s >= ms.src_end then return false end
  local c = sbyte(ms.src, s)
  local pc = pbyte(ms, p)
  if pc == B_DOT then return true
  elseif pc == L_ESC then return match_class(c, pbyte(ms, p + 1))
  elseif pc == B_LBRACKET then
    local set = ms.sets[p]
    if not set then
      set = {}
      ms.sets[p] = set
    end
    local r = set[c]
    if r == nil then
      r = match_bracket_class(ms, c, p, ep - 1)
      set[c] = r
    end
    return r
  end
  return pc == c
end

local function match_balance(ms, s, p)
  if p >= ms.p_end - 1 then raise("malformed pattern (missing arguments to '%b')") end
  local b = pbyte(ms, p)
  if (sbyte(ms.src, s) or 0) ~= b then return nil end
  local e, cont, src, src_end = pbyte(ms, p + 1), 1, ms.src, ms.src_end
  s = s + 1
  while s < src_end do
    local c = sbyte(src, s)
    if c == e then
      cont = cont - 1
      if cont == 0 then return s + 1 end
    elseif c == b then
      cont = cont + 1
    end
    s = s + 1
  end
  return nil
end

local do_match

-- How many bytes from s on the single-byte item at p matches: single_match in a loop,
-- with the item's kind decided once.
local function run_length(ms, s, p, ep)
  local src, src_end = ms.src, ms.src_end
  if s >= src_end then return 0 end
  local pc = pbyte(ms, p)
  local i = s
  if pc == B_DOT then
    return src_end - s
  elseif pc == L_ESC then
    local cl = pbyte(ms, p + 1)
    local set = CLASS[cl]
    if set then
      while i < src_end and set[sbyte(src, i)] do i = i + 1 end
    else
      while i < src_end and sbyte(src, i) == cl do i = i + 1 end
    end
  elseif pc == B_LBRACKET then
    while i < src_end and single_match(ms, i, p, ep) do i = i + 1 end
  else
    while i < src_end and sbyte(src, i) == pc do i = i + 1 end
  end
  return i - s
end

local function max_expand(ms, s, p, ep)
  local i = run_length(ms, s, p, ep)
  while i >= 0 do
    local res = do_match(ms, s + i, ep + 1)
    if res then return res end
    i = i - 1
  end
  return nil
end

local function min_expand(ms, s, p, ep)
  while true do
    local res = do_match(ms, s, ep + 1)
    if res then return res end
    if not single_match(ms, s, p, ep) then return nil end
    s = s + 1
  end
end

local function start_capture(ms, s, p, what)
  local level = ms.level
  if level >= MAXCAPTURES then raise("too many captures") end
  ms.cinit[level + 1], ms.clen[level + 1] = s, what
  ms.level = level + 1
  local res = do_match(ms, s, p)
  if not res then ms.level = ms.level - 1 end
  return res
end

local function end_capture(ms, s, p)
  local l
  for level = ms.level, 1, -1 do
    if ms.clen[level] == CAP_UNFINISHED then l = level break end
  end
  if not l then raise("invalid pattern capture") end
  ms.clen[l] = s - ms.cinit[l]
  local res = do_match(ms, s, p)
  if not res then ms.clen[l] = CAP_UNFINISHED end
  return res
end

local function match_capture(ms, s, ch)
  local l = ch - B_1
  if l < 0 or l >= ms.level or ms.clen[l + 1] == CAP_UNFINISHED then
    raise(sfmt("invalid capture index %%%d", l + 1))
  end
  local len, init = ms.clen[l + 1], ms.cinit[l + 1]
  -- A position capture's length is negative: C compares it as a huge size_t and fails.
  if len >= 0 and ms.src_end - s >= len and ssub(ms.src, init, init + len - 1) == ssub(ms.src, s, s + len - 1) then
    return s + len
  end
  return nil
end

do_match = function(ms, s, p)
  -- As C: `if (ms->matchdepth-- == 0) error`, so an error leaves the count at -1.
  local depth = ms.matchdepth
  ms.matchdepth = depth - 1
  if depth == 0 then raise("pattern too complex") end
  local p_end = ms.p_end
  while p ~= p_end do
    local pc = pbyte(ms, p)
    local default = false
    if pc == B_LPAREN then
      if pbyte(ms, p + 1) == B_RPAREN then s = start_capture(ms, s, p + 2, CAP_POSITION)
      else s = start_capture(ms, s, p + 1, CAP_UNFINISHED) end
      break
    elseif pc == B_RPAREN then
      s = end_capture(ms, s, p + 1)
      break
    elseif pc == B_DOLLAR and p + 1 == p_end then
      if s ~= ms.src_end then s = nil end
      break
    elseif pc == L_ESC then
      local nc = pbyte(ms, p + 1)
      if nc == B_b then
        s = match_balance(ms, s, p + 2)
        if not s then break end
        p = p + 4
      elseif nc == B_f then
        p = p + 2
        if pbyte(ms, p) ~= B_LBRACKET then raise("missing '[' after '%f' in pattern") end
        local ep = class_end(ms, p)
        local previous = (s == 1) and 0 or sbyte(ms.src, s - 1)
        if not match_bracket_class(ms, previous, p, ep - 1)
          and match_bracket_class(ms, sbyte(ms.src, s) or 0, p, ep - 1) then
          p = ep
        else
          s = nil
          break
        end
      elseif nc >= B_0 and nc <= B_9 then
        s = match_capture(ms, s, nc)
        if not s then break end
        p = p + 2
      else
        default = true
      end
    else
      default = true
    end
    if default then
      local ep = class_end(ms, p)
      local epc = pbyte(ms, ep)
      if not single_match(ms, s, p, ep) then
        if epc == B_STAR or epc == B_QUESTION or epc == B_MINUS then
          p = ep + 1
        else
          s = nil
          break
        end
      elseif epc == B_QUESTION then
        local res = do_match(ms, s + 1, ep + 1)
        if res then
          s = res
          break
        end
        p = ep + 1
      elseif epc == B_PLUS then
        s = max_expand(ms, s + 1, p, ep)
        break
      elseif epc == B_STAR then
        s = max_expand(ms, s, p, ep)
        break
      elseif epc == B_MINUS then
        s = min_expand(ms, s, p, ep)
        break
      else
        s = s + 1
        p = ep
      end
    end
  end
  ms.matchdepth = ms.matchdepth + 1
  return s
end

-- A pattern's bytes and memo tables, shared by the calls that use the same pattern.
local programs, program_count = {}, 0

-- Only short patterns are kept: a table entry per byte of a long one would hold memory
-- long after its call.
local CACHED_PATTERN = 4096

local function compiled(p)
  local prog = programs[p]
  if prog then return prog end
  local keep = #p <= CACHED_PATTERN
  if keep and program_count >= 256 then programs, program_count = {}, 0 end
  local pb = {}
  -- Pattern strings are short; a long one is read in slices so no call passes too many
  -- values at once.
  for i = 1, #p, 4096 do
    local chunk = { sbyte(p, i, i + 4095) }
    for j = 1, #chunk do pb[i + j - 1] = chunk[j] end
  end
  prog = { pb = pb, ce = {}, sets = {} }
  if keep then programs[p], program_count = prog, program_count + 1 end
  return prog
end

local function new_state(src, p)
  local prog = compiled(p)
  return { src = src, src_end = #src + 1, p = p, p_end = #p + 1, level = 0,
    matchdepth = MAXCCALLS, cinit = {}, clen = {}, pb = prog.pb, ce = prog.ce, sets = prog.sets }
end

-- C resets only the capture level between attempts: the depth count is restored by
-- every return, and after a "pattern too complex" error a gmatch iterator keeps the
-- spent count (and then never reaches 0 again), which the port reproduces.
local function reprep(ms)
  ms.level = 0
end

-- One capture (0-based i) of a match from s to e (exclusive).
local function get_capture(ms, i, s, e)
  if i >= ms.level then
    if i ~= 0 then raise(sfmt("invalid capture index %%%d", i + 1)) end
    return ssub(ms.src, s, e - 1)
  end
  local l, init = ms.clen[i + 1], ms.cinit[i + 1]
  if l == CAP_UNFINISHED then raise("unfinished capture") end
  if l == CAP_POSITION then return init end
  return ssub(ms.src, init, init + l - 1)
end

-- All captures; s == nil (find) means no whole-match capture when there are none.
local function captures(ms, s, e)
  local n = (ms.level == 0 and s) and 1 or ms.level
  if n == 0 then return end
  if n == 1 then return get_capture(ms, 0, s, e) end
  local out = {}
  for i = 1, n do out[i] = get_capture(ms, i - 1, s, e) end
  return unpack(out, 1, n)
end

---------------------------------------------------------------------------------------
-- Arguments, checked as lauxlib checks them.
---------------------------------------------------------------------------------------
local function typename(v, present)
  if not present then return "no value" end
  local mt = raw_getmt(v)
  local name = mt and rawget_(mt, "__name")
  if type_(name) == "string" then return name end
  return type_(v)
end

local function check_string(v, arg, fname, nargs)
  local t = type_(v)
  if t == "string" then return v end
  if t == "number" then return tostring_(v) end
  argerror(arg, fname, sfmt("string expected, got %s", typename(v, arg <= nargs)))
end

local function opt_integer(v, arg, default, fname, nargs)
  if v == nil then return default end
  local i = tointeger(v)
  if i then return i end
  if type_(v) == "number" or (type_(v) == "string" and tonumber_(v)) then
    argerror(arg, fname, "number has no integer representation")
  end
  argerror(arg, fname, sfmt("number expected, got %s", typename(v, arg <= nargs)))
end

-- lstrlib's posrelatI: a 1-based start, clipped to 1.
local function start_at(pos, len)
  if pos > 0 then return pos
  elseif pos == 0 then return 1
  elseif pos < -len then return 1
  end
  return len + pos + 1
end

---------------------------------------------------------------------------------------
-- The four functions.
---------------------------------------------------------------------------------------
local function has_specials(p)
  return c_find(p, "[%^%$%*%+%?%.%(%[%%%-]") ~= nil
end

-- lmemfind: the first occurrence of p at or after init, by plain comparison.
local function plain_find(s, p, init)
  local lp = #p
  if lp == 0 then return init end
  local last = #s - lp + 1
  local first = ssub(p, 1, 1)
  while init <= last do
    local at = c_find(s, first, init, true)
    if not at or at > last then return nil end
    if ssub(s, at, at + lp - 1) == p then return at end
    init = at + 1
  end
  return nil
end

local function find_aux(find, fname, ...)
  local nargs = select_("#", ...)
  local s, p, init, plain = ...
  s = check_string(s, 1, fname, nargs)
  p = check_string(p, 2, fname, nargs)
  local ls = #s
  init = start_at(opt_integer(init, 3, 1, fname, nargs), ls) - 1
  if init > ls then return nil end
  if find and (plain or not has_specials(p)) then
    local at = plain_find(s, p, init + 1)
    if at then return at, at + #p - 1 end
    return nil
  end
  local ms = new_state(s, p)
  local anchor = sbyte(p, 1) == B_CARET
  local pstart = anchor and 2 or 1
  local s1 = init + 1
  while true do
    reprep(ms)
    local res = do_match(ms, s1, pstart)
    if res then
      if find then return s1, res - 1, captures(ms, nil, 0) end
      return captures(ms, s1, res)
    end
    if anchor or s1 >= ms.src_end then break end
    s1 = s1 + 1
  end
  return nil
end

local M = {}

function M.find(...) return find_aux(true, "find", ...) end
function M.match(...) return find_aux(false, "match", ...) end

function M.gmatch(...)
  local nargs = select_("#", ...)
  local s, p, init = ...
  s = check_string(s, 1, "gmatch", nargs)
  p = check_string(p, 2, "gmatch", nargs)
  local ls = #s
  init = start_at(opt_integer(init, 3, 1, "gmatch", nargs), ls) - 1
  if init > ls then init = ls + 1 end
  local ms = new_state(s, p)
  local src, lastmatch = init + 1, nil
  return function()
    while src <= ms.src_end do
      reprep(ms)
      local e = do_match(ms, src, 1)
      if e and e ~= lastmatch then
        local start = src
        src, lastmatch = e, e
        return captures(ms, start, e)
      end
      src = src + 1
    end
  end
end

-- add_s: a replacement string with %0-%9 and %%.
local function add_string(ms, out, news, s, e)
  local i, l = 1, #news
  while true do
    local at = c_find(news, "%", i, true)
    if not at then break end
    out[#out + 1] = ssub(news, i, at - 1)
    local c = sbyte(news, at + 1) or 0
    if c == L_ESC then
      out[#out + 1] = "%"
    elseif c == B_0 then
      out[#out + 1] = ssub(ms.src, s, e - 1)
    elseif c >= B_1 and c <= B_9 then
      out[#out + 1] = tostring_(get_capture(ms, c - B_1, s, e))
    else
      raise("invalid use of '%' in replacement string")
    end
    i = at + 2
  end
  if i <= l then out[#out + 1] = ssub(news, i) end
end

local function add_value(ms, out, s, e, tr, repl)
  local v
  if tr == "function" then
    v = repl(captures(ms, s, e))
  elseif tr == "table" then
    v = repl[get_capture(ms, 0, s, e)]
  else
    add_string(ms, out, tostring_(repl), s, e)
    return true
  end
  if not v then
    out[#out + 1] = ssub(ms.src, s, e - 1)
    return false
  end
  local t = type_(v)
  if t ~= "string" and t ~= "number" then raise(sfmt("invalid replacement value (a %s)", t)) end
  out[#out + 1] = tostring_(v)
  return true
end

function M.gsub(...)
  local nargs = select_("#", ...)
  local original, p, repl, max_s = ...
  local src = check_string(original, 1, "gsub", nargs)
  p = check_string(p, 2, "gsub", nargs)
  local tr = type_(repl)
  max_s = opt_integer(max_s, 4, #src + 1, "gsub", nargs)
  if tr ~= "number" and tr ~= "string" and tr ~= "function" and tr ~= "table" then
    argerror(3, "gsub", sfmt("string/function/table expected, got %s", typename(repl, nargs >= 3)))
  end
  local anchor = sbyte(p, 1) == B_CARET
  local pstart = anchor and 2 or 1
  local ms = new_state(src, p)
  local out, n, changed, lastmatch = {}, 0, false, nil
  local pos, copied = 1, 1 -- src[copied, pos) is unmatched text not yet in out
  while n < max_s do
    reprep(ms)
    local e = do_match(ms, pos, pstart)
    if e and e ~= lastmatch then
      n = n + 1
      if copied < pos then out[#out + 1] = ssub(src, copied, pos - 1) end
      changed = add_value(ms, out, pos, e, tr, repl) or changed
      pos, lastmatch, copied = e, e, e
    elseif pos < ms.src_end then
      pos = pos + 1
    else
      break
    end
    if anchor then break end
  end
  if not changed then return src, n end -- C converted a number argument in place
  out[#out + 1] = ssub(src, copied)
  return tconcat(out), n
end

---------------------------------------------------------------------------------------
-- The router: the C matcher where its worst case is small and no error can arise,
-- the port everywhere else.
---------------------------------------------------------------------------------------

-- Work the C matcher may do without the hook. One unit of the estimate below has cost C
-- up to about 11 ns (a many-capture pattern; a one-class scan costs about 3 ns, and
-- backtracking less), so a call sent to C ends within about 0.3 s: each call reports its
-- worst case (`spent`), so a loop of them is stopped by the CPU time limit, and the port,
-- 30-60 times slower, takes only calls that would run longer.
local C_BUDGET = 3e7

-- What a pattern costs and whether it can raise: walks the items as do_match reads
-- them. A quantifier (* + -) multiplies the work by the subject's length unless only
-- capture ends follow it (then it scans once and the match ends); so do %b and a
-- back-reference. `?` doubles it. Static errors mirror the dynamic ones exactly, since
-- captures open and close in pattern order.
local function analyse(p, pstart)
  local ms = new_state("", p)
  local ok, k, kopt, level = pcall(function()
    local p_end, i, level, closed, open = ms.p_end, pstart, 0, {}, {}
    local k, kopt, depth = 0, 0, 1
    local function trailing(j)
      while j < p_end do
        if pbyte(ms, j) ~= B_RPAREN then return false end
        j = j + 1
      end
      return true
    end
    while i < p_end do
      local c = pbyte(ms, i)
      if c == B_LPAREN then
        if level >= MAXCAPTURES then error("captures") end
        level = level + 1
        depth = depth + 1
        if pbyte(ms, i + 1) == B_RPAREN then closed[level] = true i = i + 2
        else open[#open + 1] = level i = i + 1 end
      elseif c == B_RPAREN then
        if #open == 0 then error("close") end
        closed[open[#open]] = true
        open[#open] = nil
        depth = depth + 1
        i = i + 1
      elseif c == B_DOLLAR and i + 1 == p_end then
        i = i + 1
      elseif c == L_ESC and pbyte(ms, i + 1) == B_b then
        if i + 2 >= p_end - 1 then error("balance") end
        k = k + 1
        i = i + 4
      elseif c == L_ESC and pbyte(ms, i + 1) == B_f then
        if pbyte(ms, i + 2) ~= B_LBRACKET then error("frontier") end
        i = class_end(ms, i + 2)
      elseif c == L_ESC and pbyte(ms, i + 1) >= B_0 and pbyte(ms, i + 1) <= B_9 then
        local l = pbyte(ms, i + 1) - B_1
        if l < 0 or l >= level or not closed[l + 1] then error("backref") end
        k = k + 1
        i = i + 2
      else
        local ep = class_end(ms, i)
        local q = pbyte(ms, ep)
        if q == B_STAR or q == B_PLUS or q == B_MINUS then
          if not trailing(ep + 1) then k = k + 1 end
          depth = depth + 1
          i = ep + 1
        elseif q == B_QUESTION then
          kopt = kopt + 1
          depth = depth + 1
          i = ep + 1
        else
          i = ep
        end
      end
    end
    if #open > 0 or depth >= MAXCCALLS - 10 then error("unfinished") end
    return k, kopt, level
  end)
  if not ok then return nil end
  return { k = k, kopt = kopt, level = level }
end

local cache, cached = {}, 0

local function shape(p, anchored)
  if #p > CACHED_PATTERN then return analyse(p, anchored and 2 or 1) or false end
  local key = anchored and p or "\0" .. p
  local entry = cache[key]
  if entry == nil then
    if cached >= 512 then cache, cached = {}, 0 end
    entry = analyse(p, anchored and 2 or 1) or false
    cache[key], cached = entry, cached + 1
  end
  return entry
end

-- C(a, b) as a float (inf when huge).
local function choose(a, b)
  local r = 1.0
  for i = 1, b do r = r * (a - b + i) / i end
  return r
end

-- An upper bound on the work of matching p over n bytes. The backtracking search gives
-- its k multiplying items lengths whose sum is at most n, so it visits at most
-- (k + 1) * C(n + k, k) nodes from one start, each costing about the pattern's length;
-- over every start of an unanchored search the sum is C(n + k + 1, k + 1).
local function work(entry, n, anchored, plen)
  local k = entry.k
  local ways = anchored and choose(n + k, k) or choose(n + k + 1, k + 1)
  return (k + 1) * ways * 2.0 ^ entry.kopt * (plen + 2)
end

-- The worst-case work of a call C may run (told to `spent`), or nil when the port must.
local function cheap(entry, n, anchored, plen, extra)
  if not entry then return nil end
  local w = work(entry, n, anchored, plen) + (extra or 0)
  if w <= C_BUDGET then return w end
  return nil
end

local function remaining(s, init)
  if init == nil then return #s end
  return #s - start_at(init, #s) + 1
end

-- The worst-case work of a find or match C may run, or nil.
local function c_ok_find(s, p, init, plain, find)
  if type_(s) ~= "string" or type_(p) ~= "string" then return nil end
  if init ~= nil and mtype(init) ~= "integer" then return nil end
  local n = remaining(s, init)
  if n < 0 then return 0 end -- starts past the end: nothing to match
  if find and (plain or not has_specials(p)) then
    -- memchr and memcmp: about 8 times cheaper a unit than the matcher.
    local w = n * #p / 8
    if w <= C_BUDGET then return w end
    return nil
  end
  local anchored = sbyte(p, 1) == B_CARET
  return cheap(shape(p, anchored), n, anchored, #p)
end

local function repl_ok(repl, level)
  local t = type_(repl)
  if t == "number" then return true end
  if t ~= "string" then return t == "function" or t == "table" end
  local i = 1
  while true do
    local at = c_find(repl, "%", i, true)
    if not at then return true end
    local c = sbyte(repl, at + 1) or 0
    if not (c == L_ESC or c == B_0 or (c >= B_1 and c <= B_9 and c - B_1 < (level > 0 and level or 1))) then
      return false
    end
    i = at + 2
  end
end

-- Not a tail call, so the router's frame (and the name its caller used) stays on the
-- stack for argument errors.
local function pass(...) return ... end

function M.router(skip)
  local find, match, gmatch, gsub = M.find, M.match, M.gmatch, M.gsub
  skip[c_find], skip[c_match], skip[c_gmatch], skip[c_gsub] = true, true, true, true

  -- Each call C runs reports its worst case once it returns (a gmatch iterator, at each
  -- step), so a loop of calls that are each allowed is still seen adding up.
  local function after(w, ...)
    spent(w)
    return ...
  end

  local routed = {}
  function routed.find(...)
    local s, p, init, plain = ...
    local w = c_ok_find(s, p, init, plain, true)
    if w then return after(w, c_find(s, p, init, plain)) end
    return pass(find(...))
  end
  function routed.match(...)
    local s, p, init = ...
    local w = c_ok_find(s, p, init, nil, false)
    if w then return after(w, c_match(s, p, init)) end
    return pass(match(...))
  end
  function routed.gmatch(...)
    local s, p, init = ...
    if type_(s) == "string" and type_(p) == "string" and (init == nil or mtype(init) == "integer") then
      local n = remaining(s, init)
      local w = n < 0 and 0 or cheap(shape(p, false), n, false, #p)
      if w then
        local step = c_gmatch(s, p, init)
        return function() return after(w, step()) end
      end
    end
    return pass(gmatch(...))
  end
  function routed.gsub(...)
    local s, p, repl, max_s = ...
    if type_(s) == "string" and type_(p) == "string" and (max_s == nil or mtype(max_s) == "integer") then
      local anchored = sbyte(p, 1) == B_CARET
      local entry = shape(p, anchored)
      -- A replacement string is read again at every match (at most one a byte, and one more).
      local w = entry and cheap(entry, #s, anchored, #p, type_(repl) == "string" and (#s + 1) * #repl or 0)
      if w and repl_ok(repl, entry.level or 0) then
        local t = type_(repl)
        if t == "function" or t == "table" then
          -- C would raise "invalid replacement value" at the engine's line: check here.
          local f = repl
          repl = function(...)
            local v
            if t == "function" then v = f(...) else v = f[(...)] end
            if v and type_(v) ~= "string" and type_(v) ~= "number" then
              raise(sfmt("invalid replacement value (a %s)", type_(v)))
            end
            return v
          end
        end
        return after(w, c_gsub(s, p, repl, max_s))
      end
    end
    return pass(gsub(...))
  end
  return routed
end

return M

-- Guards for the C library functions whose loops the count hook cannot reach.
--
-- A C function runs to its end between two hook checks, so one whose loop count the
-- caller controls would hold a worker past every budget and step timeout:
--   string.rep("", 2^62)                    loops 2^62 times copying nothing
--   table.move({}, 1, 2^40, 1)              moves 2^40 nils
--   table.insert(t, 1, v), table.remove(t, 1)
--                                           shift #t elements, and #t is whatever a
--                                           __len says
--   table.sort(t)                           with a __len and C metamethods (__index =
--                                           type) sorts 2^31 elements; or sorts long
--                                           strings, each comparison reading megabytes
--   table.concat(t, "", 1, math.maxinteger) with a C function as __index joins 2^63
--                                           empty strings
-- Each guard keeps the C function for calls whose loop is short and whose arguments
-- cannot raise (a C error would name the engine's line, not the caller's), and runs a
-- line-by-line Lua port of ltablib.c otherwise, where the hook counts every iteration.
--
-- The chunk takes an optional `opts` with `error(msg)` and `argerror(arg, fname,
-- extramsg)` (as patterns.lua does) and returns the replacement functions.
local opts = ... or {}

local sfmt = string.format
local raise = opts.error or function(msg) error(msg, 0) end
local argerror = opts.argerror or function(arg, fname, extramsg)
  error(sfmt("bad argument #%d to '%s' (%s)", arg, fname, extramsg), 0)
end
local c_rep, c_insert, c_remove, c_move, c_sort = string.rep, table.insert, table.remove, table.move, table.sort
local c_concat, c_unpack = table.concat, table.unpack
local getinfo = debug.getinfo
local spent = opts.spent or function() end
local type_, select_, rawget_, tostring_ = type, select, rawget, tostring
local pack, unpack_ = table.pack, table.unpack
local tointeger, mtype, ult, maxinteger = math.tointeger, math.type, math.ult, math.maxinteger
-- lstrlib's MAXSIZE: string.rep refuses results over INT_MAX bytes.
local MAXSIZE = 0x7fffffff
local raw_getmt = debug.getmetatable

-- Loops shorter than this run in C: at most a few milliseconds, even through C
-- metamethods.
local SHORT = 4096

local TAB_R, TAB_W, TAB_L = 1, 2, 4

local function typename(v, present)
  if not present then return "no value" end
  local mt = raw_getmt(v)
  local name = mt and rawget_(mt, "__name")
  if type_(name) == "string" then return name end
  return type_(v)
end

local function check_integer(v, arg, fname, nargs)
  local i = tointeger(v)
  if i then return i end
  if type_(v) == "number" or (type_(v) == "string" and tonumber(v)) then
    argerror(arg, fname, "number has no integer representation")
  end
  argerror(arg, fname, sfmt("number expected, got %s", typename(v, arg <= nargs)))
end

-- ltablib's checktab: a table, or a value whose metatable has the needed metamethods.
local function check_table(v, arg, what, fname, nargs)
  if type_(v) == "table" then return end
  local mt = raw_getmt(v)
  if mt and (what & TAB_R == 0 or rawget_(mt, "__index") ~= nil)
    and (what & TAB_W == 0 or rawget_(mt, "__newindex") ~= nil)
    and (what & TAB_L == 0 or rawget_(mt, "__len") ~= nil) then
    return
  end
  argerror(arg, fname, sfmt("table expected, got %s", typename(v, arg <= nargs)))
end

-- luaL_len
local function length(t)
  local n = tointeger(#t)
  if not n then raise("object length is not an integer") end
  return n
end

local function plain(t) return type_(t) == "table" and raw_getmt(t) == nil end

local guards = {}

function guards.rep(...)
  local s, n, sep = ...
  if type_(s) == "string" and mtype(n) == "integer" and (sep == nil or type_(sep) == "string") then
    local l = #s + (sep and #sep or 0)
    if n <= 0 or l == 0 then return "" end
    if l > MAXSIZE // n then raise("resulting string too large") end
    return c_rep(s, n, sep)
  end
  -- Unusual arguments (numbers as strings, bad types): the port of str_rep.
  local nargs = select_("#", ...)
  local function str(v, arg)
    if type_(v) == "string" then return v end
    if type_(v) == "number" then return tostring_(v) end
    argerror(arg, "rep", sfmt("string expected, got %s", typename(v, arg <= nargs)))
  end
  s = str(s, 1)
  n = check_integer(n, 2, "rep", nargs)
  if sep ~= nil then sep = str(sep, 3) else sep = "" end
  if n <= 0 or #s + #sep == 0 then return "" end
  if #s + #sep > MAXSIZE // n then raise("resulting string too large") end
  return c_rep(s, n, sep)
end

function guards.insert(...)
  local nargs = select_("#", ...)
  local t, pos, v = ...
  if plain(t) then
    if nargs == 2 then return c_insert(t, pos) end
    if nargs == 3 and mtype(pos) == "integer" then
      local e = #t + 1
      if pos >= 1 and pos <= e and e - pos < SHORT then return c_insert(t, pos, v) end
    end
  end
  check_table(t, 1, TAB_R | TAB_W | TAB_L, "insert", nargs)
  local e = length(t) + 1
  if nargs == 2 then
    t[e] = pos
    return
  elseif nargs ~= 3 then
    raise("wrong number of arguments to 'insert'")
  end
  pos = check_integer(pos, 2, "insert", nargs)
  if not ult(pos - 1, e) then argerror(2, "insert", "position out of bounds") end
  for i = e, pos + 1, -1 do t[i] = t[i - 1] end
  t[pos] = v
end

function guards.remove(...)
  local nargs = select_("#", ...)
  local t, pos = ...
  if plain(t) and (pos == nil or mtype(pos) == "integer") then
    local size = #t
    local p = pos or size
    if (p == size or (p >= 1 and p <= size + 1)) and size - p < SHORT then return c_remove(t, pos) end
  end
  check_table(t, 1, TAB_R | TAB_W | TAB_L, "remove", nargs)
  local size = length(t)
  if pos == nil then pos = size else pos = check_integer(pos, 2, "remove", nargs) end
  if pos ~= size and ult(size, pos - 1) then argerror(2, "remove", "position out of bounds") end
  local result = t[pos]
  while pos < size do
    t[pos] = t[pos + 1]
    pos = pos + 1
  end
  t[pos] = nil
  return result
end

function guards.move(...)
  local nargs = select_("#", ...)
  local a1, f, e, t, a2 = ...
  if type_(a1) == "table" and (a2 == nil or type_(a2) == "table")
    and mtype(f) == "integer" and mtype(e) == "integer" and mtype(t) == "integer" then
    local short = e < f or (f >= 0 and e - f < SHORT) or (f < 0 and e < f + SHORT)
    if short and (e < f or t <= maxinteger - (e - f)) then return c_move(a1, f, e, t, a2) end
  end
  f = check_integer(f, 2, "move", nargs)
  e = check_integer(e, 3, "move", nargs)
  t = check_integer(t, 4, "move", nargs)
  local dest = a1
  if a2 ~= nil then dest = a2 end
  check_table(a1, 1, TAB_R, "move", nargs)
  check_table(dest, a2 ~= nil and 5 or 1, TAB_W, "move", nargs)
  if e >= f then
    if not (f > 0 or e < maxinteger + f) then argerror(3, "move", "too many elements to move") end
    local n = e - f + 1
    if t > maxinteger - n + 1 then argerror(4, "move", "destination wrap around") end
    if t > e or t <= f or (a2 ~= nil and a1 ~= dest) then
      for i = 0, n - 1 do dest[t + i] = a1[f + i] end
    else
      for i = n - 1, 0, -1 do dest[t + i] = a1[f + i] end
    end
  end
  return dest
end

-- ltablib's auxsort and partition, with the pivot always in the middle (C picks a
-- random one for badly split ranges, which would also make replays disagree).
local function lt(a, b) return a < b end

local function sort_lt(cmp, a, b)
  if cmp then return not not cmp(a, b) end
  if type_(a) == type_(b) and (type_(a) == "number" or type_(a) == "string") then return a < b end
  -- Anything else may raise "attempt to compare ...": without this file's position, as
  -- from C's sort.
  local ok, r = pcall(lt, a, b)
  if ok then return r end
  if type_(r) == "string" then r = r:gsub("^%[lunaflow guards%]:%d+: ", "", 1) end
  error(r, 0)
end

local function partition(t, cmp, lo, up)
  local i, j = lo, up - 1
  local pivot = t[up - 1]
  while true do
    i = i + 1
    while sort_lt(cmp, t[i], pivot) do
      if i == up - 1 then raise("invalid order function for sorting") end
      i = i + 1
    end
    j = j - 1
    while sort_lt(cmp, pivot, t[j]) do
      if j < i then raise("invalid order function for sorting") end
      j = j - 1
    end
    if j < i then
      t[up - 1], t[i] = t[i], t[up - 1]
      return i
    end
    t[i], t[j] = t[j], t[i]
  end
end

local function auxsort(t, cmp, lo, up)
  while lo < up do
    if sort_lt(cmp, t[up], t[lo]) then t[lo], t[up] = t[up], t[lo] end
    if up - lo == 1 then break end
    local p = (lo + up) // 2
    if sort_lt(cmp, t[p], t[lo]) then
      t[p], t[lo] = t[lo], t[p]
    elseif sort_lt(cmp, t[up], t[p]) then
      t[p], t[up] = t[up], t[p]
    end
    if up - lo == 2 then break end
    t[p], t[up - 1] = t[up - 1], t[p]
    p = partition(t, cmp, lo, up)
    if p - lo < up - p then
      auxsort(t, cmp, lo, p - 1)
      lo = p + 1
    else
      auxsort(t, cmp, p + 1, up)
      up = p - 1
    end
  end
end

-- C's own sort errors carry no position when it runs under pcall: give them the
-- caller's. Anything else (the comparator's errors, a stopped budget) passes unchanged.
local function sorted(ok, e)
  if ok then return end
  if e == "invalid order function for sorting" or e == "object length is not an integer" then raise(e) end
  error(e, 0)
end

-- Bytes C's sort may compare without the hook: n log n comparisons of strings as long as
-- the longest (strcoll reads them through).
local SORT_BYTES = 1e8

local function long_strings(t, n)
  if type_(rawget_(t, 1)) ~= "string" then return false end
  local longest = 0
  for i = 1, n do
    local v = rawget_(t, i)
    if type_(v) == "string" and #v > longest then longest = #v end
  end
  local log = 1
  while (1 << log) < n do log = log + 1 end
  return n * log * longest > SORT_BYTES
end

function guards.sort(...)
  local t, cmp = ...
  if type_(cmp) == "function" and getinfo(cmp, "S").what == "C" then
    -- A C comparator (rawequal, say) would let C's sort run without one Lua instruction
    -- between comparisons, out of the hook's reach: call it from Lua.
    local c = cmp
    cmp = function(a, b) return c(a, b) end
  end
  -- Without a metatable #t only counts what the table holds (or stops at the first
  -- nil it compares), so C's loop is bounded by memory.
  if plain(t) and (cmp == nil or type_(cmp) == "function") and #t < 0x7fffffff
    and (cmp ~= nil or not long_strings(t, #t)) then
    return sorted(pcall(c_sort, t, cmp))
  end
  local nargs = select_("#", ...)
  check_table(t, 1, TAB_R | TAB_W | TAB_L, "sort", nargs)
  local n = length(t)
  if n > 1 then
    if n >= 0x7fffffff then argerror(1, "sort", "array too big") end
    if cmp ~= nil and type_(cmp) ~= "function" then
      argerror(2, "sort", sfmt("function expected, got %s", typename(cmp, true)))
    end
    auxsort(t, cmp, 1, n)
  end
end

-- ltablib's tunpack: C for a table without a metatable (each element a plain read), this
-- port when __index or __len may run, where each element is read by a Lua instruction.
-- More results than a Lua stack can hold is C's error.
local MAX_RESULTS = 1000000
local SHORT_UNPACK = 8192

function guards.unpack(...)
  local nargs = select_("#", ...)
  local t, i, j = ...
  if plain(t) and (i == nil or mtype(i) == "integer") and (j == nil or mtype(j) == "integer") then
    local first, last = i or 1, j or #t
    -- The count as C takes it, unsigned: mininteger to maxinteger is too many, not none.
    if first > last or ult(last - first, SHORT_UNPACK) then return c_unpack(t, i, j) end
    if not ult(last - first, MAX_RESULTS) then raise("too many results to unpack") end
    local r = pack(pcall(c_unpack, t, i, j))
    if not r[1] then raise(r[2]) end
    return unpack_(r, 2, r.n)
  end
  if i == nil then i = 1 else i = check_integer(i, 2, "unpack", nargs) end
  local mt = raw_getmt(t)
  if j == nil then
    -- luaL_len, raising as lua_len does from C: without a position.
    if type_(t) ~= "table" and type_(t) ~= "string" and not (mt and rawget_(mt, "__len")) then
      error(sfmt("attempt to get length of a %s value", typename(t, true)), 0)
    end
    j = length(t)
  else
    j = check_integer(j, 3, "unpack", nargs)
  end
  if i > j then return end
  if not ult(j - i, MAX_RESULTS) then raise("too many results to unpack") end
  if type_(t) ~= "table" and type_(t) ~= "string" and not (mt and rawget_(mt, "__index")) then
    error(sfmt("attempt to index a %s value", typename(t, true)), 0)
  end
  local r, n = {}, 0
  for k = i, j do
    n = n + 1
    r[n] = t[k]
  end
  return c_unpack(r, 1, n)
end

-- C's words for a bad element, whichever Lua 5.4 release this is: later ones name the
-- value's type ("invalid value (table) at index 2 ..."), earlier ones do not.
local CONCAT_TYPED = (select_(2, pcall(c_concat, { {} })) or ""):find("(table)", 1, true) ~= nil

local function bad_element(v, k)
  if CONCAT_TYPED then raise(sfmt("invalid value (%s) at index %d in table for 'concat'", type_(v), k)) end
  raise(sfmt("invalid value (at index %d) in table for 'concat'", k))
end

-- ltablib's tconcat: C when the table has no metatable (a missing element raises, so the
-- loop is bounded by what the table holds), this port otherwise, where __index and __len
-- are called from Lua and the hook counts every element.
function guards.concat(...)
  local nargs = select_("#", ...)
  local t, sep, i, j = ...
  if plain(t) and (sep == nil or type_(sep) == "string")
    and (i == nil or mtype(i) == "integer") and (j == nil or mtype(j) == "integer") then
    local ok, r = pcall(c_concat, t, sep, i, j)
    if ok then
      spent(#r)
      return r
    end
    -- "invalid value (at index n) in table for 'concat'": C's message, at the caller's
    -- line. Anything else (out of memory) passes unchanged.
    if type_(r) == "string" and r:find("^invalid value .* in table for 'concat'$") then
      raise(r)
    end
    error(r, 0)
  end
  check_table(t, 1, TAB_R | TAB_L, "concat", nargs)
  if sep == nil then
    sep = ""
  elseif type_(sep) == "number" then
    sep = tostring_(sep)
  elseif type_(sep) ~= "string" then
    argerror(2, "concat", sfmt("string expected, got %s", typename(sep, 2 <= nargs)))
  end
  if i == nil then i = 1 else i = check_integer(i, 3, "concat", nargs) end
  if j == nil then j = length(t) else j = check_integer(j, 4, "concat", nargs) end
  local out, n = {}, 0
  local k = i
  while k <= j do
    local v = t[k]
    if type_(v) == "number" then
      v = tostring_(v)
    elseif type_(v) ~= "string" then
      bad_element(v, k)
    end
    n = n + 1
    out[n] = v
    if k == j then break end -- j may be math.maxinteger
    k = k + 1
  end
  return c_concat(out, sep)
end

return guards

-- escape: os.date with a ten-megabyte format, in a loop: strftime works through it in
-- C, a tenth of a microsecond a byte.
-- where: fetch
-- expect: error os.date format is 10000000 bytes, over the limit of 4096
local f = string.rep("%%", 5000000)
for i = 1, 1e9 do local d = os.date(f, 0) end

-- escape: ask string.rep for a terabyte in one call.
-- where: fetch
-- expect: error resulting string too large
return string.rep("x", 2 ^ 40)

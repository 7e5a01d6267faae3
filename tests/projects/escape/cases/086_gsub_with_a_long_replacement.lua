-- escape: gsub of a short pattern whose replacement string C reads again at every one of
-- a million empty matches: seconds in C, though the result stays a megabyte.
-- where: fetch
-- expect: error call stopped: it
-- isolate: yes
return (string.rep("a", 1000000):gsub("", string.rep("%0", 1000)))

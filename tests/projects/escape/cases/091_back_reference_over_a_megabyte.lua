-- escape: a back-reference that compares ever longer captures: quadratic, a capture
-- compared in one instruction of the port.
-- where: step
-- expect: error call stopped: it
-- isolate: yes
return (string.rep("a", 1000000):find("^(a*)%1b"))

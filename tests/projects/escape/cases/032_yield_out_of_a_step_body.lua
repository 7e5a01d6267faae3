-- escape: yield out of a step body, across the engine's own coroutine, to leave the step
-- half done or hand the engine a value of the script's choosing.
-- where: step
-- expect: error coroutine.yield was called outside a coroutine created by this code
coroutine.yield({ op = "wait", kind = "sleep", names = {}, timeout = "1s" })
return "resumed"

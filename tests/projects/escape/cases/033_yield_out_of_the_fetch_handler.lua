-- escape: yield out of the fetch handler, across the engine's coroutine, to suspend the
-- request with a Lua state lent to it.
-- where: fetch
-- expect: error coroutine.yield was called outside a coroutine created by this code
coroutine.yield("hold the state")
return "resumed"

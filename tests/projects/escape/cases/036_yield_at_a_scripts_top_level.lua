-- escape: yield from a script's top level, leaving the project half loaded.
-- where: load
-- expect: refused coroutine.yield was called outside a coroutine created by this code
workflow "half" (function(wf) return 1 end)
coroutine.yield()
workflow "other-half" (function(wf) return 2 end)

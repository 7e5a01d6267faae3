-- escape: yield out of an object method while its key is locked and its state unsaved.
-- where: object
-- expect: error coroutine.yield was called outside a coroutine created by this code
local self = ...
self.state.half = true
coroutine.yield()
return "resumed"

-- escape: yield out of a queue handler while its message is claimed.
-- where: queue
-- expect: error coroutine.yield was called outside a coroutine created by this code
coroutine.yield("keep the message claimed")

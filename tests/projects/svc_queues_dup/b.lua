-- A second handler for the queue a.lua handles: the project is refused.
on "queue" ("inbox", function(message) end)

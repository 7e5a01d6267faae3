on "queue" ("inbox", function(message) end)

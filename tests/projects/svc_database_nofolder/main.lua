-- Declares a migrations folder that does not exist.
local ledger = database "ledger" { migrations = "migrations/ledger" }

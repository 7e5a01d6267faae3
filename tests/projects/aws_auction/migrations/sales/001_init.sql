-- Copy of examples/auction for tests/aws/test_e2e_auction.py whose comments hold no semicolon
-- (the Data API migration splitter cuts statements at every semicolon, comments included).
-- Sales: one row per lot, and settle-sale moves state from 'open' to 'settled' or 'void'.
-- Written to run on SQLite (lunaflow dev) and PostgreSQL (Aurora, on AWS) alike.
CREATE TABLE sales (
    id TEXT PRIMARY KEY,
    winner TEXT NOT NULL,
    price INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'open',
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);

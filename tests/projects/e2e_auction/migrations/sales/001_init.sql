-- Sales: one row per lot; settle-sale moves state from 'open' to 'settled' or 'void'.
CREATE TABLE sales (
    id TEXT PRIMARY KEY,
    winner TEXT NOT NULL,
    price INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'open',
    created_at TEXT NOT NULL DEFAULT (datetime('now'))
);

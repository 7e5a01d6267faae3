-- The table the seed's settle-sale workflow updates.
CREATE TABLE sales (
    id TEXT PRIMARY KEY,
    winner TEXT NOT NULL,
    price INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'open'
);

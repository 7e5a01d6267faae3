-- SQL both SQLite and PostgreSQL accept.
CREATE TABLE items (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    price NUMERIC(10, 2),
    active BOOLEAN NOT NULL DEFAULT FALSE,
    payload TEXT
);

-- The schema. Each migration appends its own name to applied_order, so tests can see the
-- order migrations ran in.
CREATE TABLE items (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    qty INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE applied_order (file TEXT NOT NULL);
INSERT INTO applied_order VALUES ('001');

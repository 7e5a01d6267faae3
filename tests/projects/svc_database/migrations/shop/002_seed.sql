-- Needs 001's tables: it only works when applied after 001.
INSERT INTO items (name, qty) VALUES ('seed', 1);
INSERT INTO applied_order (file) VALUES ('002');

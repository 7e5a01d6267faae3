ALTER TABLE items ADD COLUMN note TEXT;
INSERT INTO applied_order (file) VALUES ('010');

CREATE TABLE applied_order (file TEXT NOT NULL);
INSERT INTO applied_order VALUES ('9');

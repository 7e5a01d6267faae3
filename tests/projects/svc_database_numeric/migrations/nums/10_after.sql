INSERT INTO applied_order (file) VALUES ('10');

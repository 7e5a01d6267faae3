INSERT INTO applied_order VALUES ('10');

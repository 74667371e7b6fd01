-- bench/programs/sqlite_script.sql - the sqlite3 workload of bench/real.py:
-- an in-memory database filled by recursive CTEs, indexed, joined, grouped
-- and sorted: the statement mix of a reporting script.
PRAGMA cache_size = -20000;
CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, region TEXT);
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER, amount REAL, note TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO customers SELECT i, 'customer ' || i, 'region ' || (i % 17) FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
INSERT INTO orders SELECT i, (i * 7919) % 20000 + 1, (i * 31 % 1000) / 10.0,
	printf('order %d for %s', i, hex(randomblob(8))) FROM n;
CREATE INDEX orders_customer ON orders(customer);
SELECT region, count(*), round(sum(amount), 2) FROM orders JOIN customers ON customers.id = orders.customer
	GROUP BY region ORDER BY 3 DESC LIMIT 5;
SELECT customer, count(*) AS n FROM orders GROUP BY customer ORDER BY n DESC, customer LIMIT 5;
SELECT count(DISTINCT substr(note, 1, 12)) FROM orders;
UPDATE orders SET note = upper(note) WHERE amount > 50;
DELETE FROM orders WHERE id % 3 = 0;
SELECT count(*), round(avg(length(note)), 3) FROM orders;

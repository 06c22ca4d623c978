-- The shop demo database for MariaDB and MySQL: the same rows as `seed.sql` (SQLite), for the
-- end-to-end tests of the shop plugin on every database. Deterministic. Rows are numbered by a
-- helper table `seq` (1 to 5,000, dropped at the end) rather than a recursive CTE, whose depth
-- MySQL limits to 1,000 by default.

CREATE TABLE customers (
  id INT AUTO_INCREMENT PRIMARY KEY,
  first_name VARCHAR(100) NOT NULL,
  last_name VARCHAR(100) NOT NULL,
  email VARCHAR(255) NOT NULL UNIQUE,
  address JSON,
  tags JSON,
  is_vip BOOLEAN NOT NULL DEFAULT FALSE,
  created_at DATETIME NOT NULL
);

CREATE TABLE products (
  id INT AUTO_INCREMENT PRIMARY KEY,
  name VARCHAR(200) NOT NULL,
  price DECIMAL(10,2) NOT NULL,
  category VARCHAR(50) NOT NULL,
  stock INT NOT NULL DEFAULT 0
);

CREATE TABLE tags (
  id INT AUTO_INCREMENT PRIMARY KEY,
  label VARCHAR(50) NOT NULL UNIQUE
);

CREATE TABLE product_tags (
  product_id INT NOT NULL,
  tag_id INT NOT NULL,
  PRIMARY KEY (product_id, tag_id),
  FOREIGN KEY (product_id) REFERENCES products(id),
  FOREIGN KEY (tag_id) REFERENCES tags(id)
);

CREATE TABLE orders (
  id INT AUTO_INCREMENT PRIMARY KEY,
  customer_id INT NOT NULL,
  status VARCHAR(20) NOT NULL DEFAULT 'pending',
  total DECIMAL(10,2) NOT NULL,
  shipping_address JSON,
  ordered_at DATETIME NOT NULL,
  shipped_on DATE,
  FOREIGN KEY (customer_id) REFERENCES customers(id)
);

CREATE TABLE order_items (
  order_id INT NOT NULL,
  product_id INT NOT NULL,
  quantity INT NOT NULL,
  unit_price DECIMAL(10,2) NOT NULL,
  PRIMARY KEY (order_id, product_id),
  FOREIGN KEY (order_id) REFERENCES orders(id),
  FOREIGN KEY (product_id) REFERENCES products(id)
);

CREATE TABLE seq (i INT NOT NULL PRIMARY KEY);
INSERT INTO seq (i)
SELECT 1 + a.d + 10 * b.d + 100 * c.d + 1000 * e.d
FROM (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
      UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a,
     (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
      UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b,
     (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
      UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c,
     (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4) e;

INSERT INTO customers (first_name, last_name, email, address, tags, is_vip, created_at)
SELECT
  CASE i % 10 WHEN 0 THEN 'Anna' WHEN 1 THEN 'Boris' WHEN 2 THEN 'Cleo' WHEN 3 THEN 'Dave' WHEN 4 THEN 'Eva' WHEN 5 THEN 'Fritz' WHEN 6 THEN 'Gina' WHEN 7 THEN 'Hugo' WHEN 8 THEN 'Iris' ELSE 'Jules' END,
  CONCAT('Customer', i),
  CONCAT('customer', i, '@example.com'),
  JSON_OBJECT('street', CONCAT(i, ' Main Street'), 'city', CASE i % 4 WHEN 0 THEN 'Paris' WHEN 1 THEN 'Lyon' WHEN 2 THEN 'Berlin' ELSE 'Madrid' END, 'zip', LPAD(i * 7 % 99999, 5, '0')),
  JSON_ARRAY(CASE WHEN i % 3 = 0 THEN 'newsletter' ELSE 'retail' END),
  i % 7 = 0,
  TIMESTAMP('2024-01-01') + INTERVAL (i * 7) HOUR
FROM seq WHERE i <= 1000
ORDER BY i;

INSERT INTO products (name, price, category, stock)
SELECT
  CONCAT('Product ', i),
  ROUND(5 + (i * 37 % 500) + (i % 100) / 100.0, 2),
  CASE i % 4 WHEN 0 THEN 'books' WHEN 1 THEN 'garden' WHEN 2 THEN 'kitchen' ELSE 'toys' END,
  i * 13 % 250
FROM seq WHERE i <= 200
ORDER BY i;

INSERT INTO tags (label) VALUES ('new'), ('sale'), ('eco'), ('gift'), ('bestseller');

INSERT INTO product_tags (product_id, tag_id)
SELECT i, 1 + i % 5 FROM seq WHERE i <= 200
UNION ALL SELECT i, 1 + (i + 2) % 5 FROM seq WHERE i <= 200 AND i % 3 = 0;

INSERT INTO orders (customer_id, status, total, shipping_address, ordered_at, shipped_on)
SELECT
  1 + (i * 31 % 1000),
  CASE i % 5 WHEN 0 THEN 'pending' WHEN 1 THEN 'paid' WHEN 2 THEN 'shipped' WHEN 3 THEN 'delivered' ELSE 'cancelled' END,
  0,
  JSON_OBJECT('city', CASE i % 3 WHEN 0 THEN 'Paris' WHEN 1 THEN 'Lyon' ELSE 'Berlin' END),
  TIMESTAMP('2024-01-01') + INTERVAL (i * 151) MINUTE,
  CASE WHEN i % 5 IN (2, 3) THEN DATE('2024-01-01') + INTERVAL (i * 151 DIV 1440 + 2) DAY END
FROM seq
ORDER BY i;

INSERT INTO order_items (order_id, product_id, quantity, unit_price)
SELECT i, 1 + (i * 7 % 200), 1 + i % 4, (SELECT price FROM products WHERE id = 1 + (i * 7 % 200)) FROM seq
UNION ALL
SELECT i, 1 + (i * 11 % 200), 1 + i % 2, (SELECT price FROM products WHERE id = 1 + (i * 11 % 200)) FROM seq WHERE i % 2 = 0 AND (i * 7 % 200) <> (i * 11 % 200);

UPDATE orders SET total = (SELECT ROUND(SUM(quantity * unit_price), 2) FROM order_items WHERE order_id = orders.id);

DROP TABLE seq;

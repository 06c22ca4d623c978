-- The shop demo database for PostgreSQL: the same rows as `seed.sql` (SQLite), for the
-- end-to-end tests of the shop plugin on every database. Deterministic. Money is NUMERIC(10,2),
-- which the agent serves as text with its scale ("12.30"), and plugins read as such.

CREATE TABLE customers (
  id SERIAL PRIMARY KEY,
  first_name VARCHAR(100) NOT NULL,
  last_name VARCHAR(100) NOT NULL,
  email VARCHAR(255) NOT NULL UNIQUE,
  address JSONB,
  tags JSONB,
  is_vip BOOLEAN NOT NULL DEFAULT FALSE,
  created_at TIMESTAMP NOT NULL
);

CREATE TABLE products (
  id SERIAL PRIMARY KEY,
  name VARCHAR(200) NOT NULL,
  price NUMERIC(10,2) NOT NULL,
  category VARCHAR(50) NOT NULL,
  stock INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE tags (
  id SERIAL PRIMARY KEY,
  label VARCHAR(50) NOT NULL UNIQUE
);

CREATE TABLE product_tags (
  product_id INTEGER NOT NULL REFERENCES products(id),
  tag_id INTEGER NOT NULL REFERENCES tags(id),
  PRIMARY KEY (product_id, tag_id)
);

CREATE TABLE orders (
  id SERIAL PRIMARY KEY,
  customer_id INTEGER NOT NULL REFERENCES customers(id),
  status VARCHAR(20) NOT NULL DEFAULT 'pending',
  total NUMERIC(10,2) NOT NULL,
  shipping_address JSONB,
  ordered_at TIMESTAMP NOT NULL,
  shipped_on DATE
);

CREATE TABLE order_items (
  order_id INTEGER NOT NULL REFERENCES orders(id),
  product_id INTEGER NOT NULL REFERENCES products(id),
  quantity INTEGER NOT NULL,
  unit_price NUMERIC(10,2) NOT NULL,
  PRIMARY KEY (order_id, product_id)
);

INSERT INTO customers (first_name, last_name, email, address, tags, is_vip, created_at)
SELECT
  CASE i % 10 WHEN 0 THEN 'Anna' WHEN 1 THEN 'Boris' WHEN 2 THEN 'Cleo' WHEN 3 THEN 'Dave' WHEN 4 THEN 'Eva' WHEN 5 THEN 'Fritz' WHEN 6 THEN 'Gina' WHEN 7 THEN 'Hugo' WHEN 8 THEN 'Iris' ELSE 'Jules' END,
  'Customer' || i,
  'customer' || i || '@example.com',
  jsonb_build_object('street', i || ' Main Street', 'city', CASE i % 4 WHEN 0 THEN 'Paris' WHEN 1 THEN 'Lyon' WHEN 2 THEN 'Berlin' ELSE 'Madrid' END, 'zip', lpad((i * 7 % 99999)::text, 5, '0')),
  jsonb_build_array(CASE WHEN i % 3 = 0 THEN 'newsletter' ELSE 'retail' END),
  i % 7 = 0,
  TIMESTAMP '2024-01-01' + (i * 7) * INTERVAL '1 hour'
FROM generate_series(1, 1000) AS n(i)
ORDER BY i;

INSERT INTO products (name, price, category, stock)
SELECT
  'Product ' || i,
  round(5 + (i * 37 % 500) + (i % 100) / 100.0, 2),
  CASE i % 4 WHEN 0 THEN 'books' WHEN 1 THEN 'garden' WHEN 2 THEN 'kitchen' ELSE 'toys' END,
  i * 13 % 250
FROM generate_series(1, 200) AS n(i)
ORDER BY i;

INSERT INTO tags (label) VALUES ('new'), ('sale'), ('eco'), ('gift'), ('bestseller');

INSERT INTO product_tags (product_id, tag_id)
SELECT i, 1 + i % 5 FROM generate_series(1, 200) AS n(i)
UNION ALL SELECT i, 1 + (i + 2) % 5 FROM generate_series(1, 200) AS n(i) WHERE i % 3 = 0;

INSERT INTO orders (customer_id, status, total, shipping_address, ordered_at, shipped_on)
SELECT
  1 + (i * 31 % 1000),
  CASE i % 5 WHEN 0 THEN 'pending' WHEN 1 THEN 'paid' WHEN 2 THEN 'shipped' WHEN 3 THEN 'delivered' ELSE 'cancelled' END,
  0,
  jsonb_build_object('city', CASE i % 3 WHEN 0 THEN 'Paris' WHEN 1 THEN 'Lyon' ELSE 'Berlin' END),
  TIMESTAMP '2024-01-01' + (i * 151) * INTERVAL '1 minute',
  CASE WHEN i % 5 IN (2, 3) THEN DATE '2024-01-01' + (i * 151 / 1440 + 2) END
FROM generate_series(1, 5000) AS n(i)
ORDER BY i;

INSERT INTO order_items (order_id, product_id, quantity, unit_price)
SELECT i, 1 + (i * 7 % 200), 1 + i % 4, (SELECT price FROM products WHERE id = 1 + (i * 7 % 200)) FROM generate_series(1, 5000) AS n(i)
UNION ALL
SELECT i, 1 + (i * 11 % 200), 1 + i % 2, (SELECT price FROM products WHERE id = 1 + (i * 11 % 200)) FROM generate_series(1, 5000) AS n(i) WHERE i % 2 = 0 AND (i * 7 % 200) <> (i * 11 % 200);

UPDATE orders SET total = (SELECT round(sum(quantity * unit_price), 2) FROM order_items WHERE order_id = orders.id);

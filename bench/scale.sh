#!/usr/bin/env bash
# How the cost of a request grows with the work it asks for (issue 23, "Scale"): page size, the
# number of plugins loaded, relation depth, and the size of the table, on PostgreSQL.
#
#   bash bench/scale.sh
#   CANOPY_BIN=target/release/canopy DURATION=5 bash bench/scale.sh
#
# What it does:
#   1. builds the release binary (or runs $CANOPY_BIN) and a scaffolded plugin (`canopy plugin
#      new`: one computed field, `greeting`, on the collection its options name);
#   2. recreates the database $DB (default canopy_scalebench) with a chain of to-one relations,
#      orders -> customers -> accounts -> regions (1M, 10k, 1k and 20 rows; each table has a
#      `tier`, id mod 4, so a filter on it keeps a quarter of the rows at every depth), a copy of
#      the first 10k orders (`orders_10k`), and 50 small tables `p1`..`p50` for the plugins;
#   3. for each scenario, runs wrk for $DURATION s (default 3) with $CONNECTIONS connections
#      (default 8) and prints req/s, p50/p99, the server's CPU time per request (and per row
#      where rows vary) and its memory high-water mark (VmHWM, reset before each scenario):
#        page size     list of orders, pages of 15, 100 and 1,000 (with the customer's email)
#        relations     list-15 of orders filtered on `tier` at depth 0 to 3
#                      (tier, customer:tier, customer:account:tier, customer:account:region:tier)
#        table size    list-15, count, search (a term that matches nothing, so every row is read)
#                      and a filtered list-15 (`status`), on orders_10k and on orders (1M)
#        plugins       1, 10 and 50 copies of the plugin (the Nth on table pN): the server's start
#                      time, its RSS once started, a reload of all of them, list-15 of orders (a
#                      collection no plugin touches) and list-15 of p1 with `greeting`;
#      count also runs with the filter on orders_10k and orders. The per-row column shows how a
#      request's cost spreads over its rows.
# The figures are for this machine only: wrk, PostgreSQL and the server share its cores.
# Linux only (/proc). Not run by CI.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi

DB=${DB:-canopy_scalebench}
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
PGUSER=${PGUSER:-postgres}
DURATION=${DURATION:-3}
CONNECTIONS=${CONNECTIONS:-8}
THREADS=${THREADS:-2}
WORK=${WORK:-$(mktemp -d /tmp/canopy-scalebench.XXXXXX)}
AUTH_SECRET=scalebench-auth-secret-not-for-production
ENV_SECRET=0000000000000000000000000000000000000000000000000000000000000000
export PGHOST PGPORT PGUSER
echo "work directory: $WORK"
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install -y wrk" >&2; exit 1; }

if [ -n "${CANOPY_BIN:-}" ]; then
  BIN=$CANOPY_BIN
else
  cargo build --release --locked -p canopy --bin canopy
  BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/canopy
fi

# --- the plugin: scaffolded as a user would, built once (its target folder is kept in target/)
echo "building the scaffolded plugin"
rm -rf "$WORK/greeting"
"$BIN" plugin new scale-greeting --dir "$WORK/greeting" --sdk "$PWD/guest-sdk" >/dev/null
PLUGIN_TARGET=${CARGO_TARGET_DIR:-$PWD/target}/scalebench-plugin
(cd "$WORK/greeting" && env -u RUSTC_WORKSPACE_WRAPPER -u RUSTFLAGS cargo build --release --quiet \
  --target-dir "$PLUGIN_TARGET")
PLUGIN_WASM=$PLUGIN_TARGET/wasm32-wasip2/release/scale_greeting.wasm

# --- the database
echo "seeding $DB (1M orders)"
psql -q -v ON_ERROR_STOP=1 -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" 2>&1 \
  | grep -v 'does not exist, skipping' || true
{
  cat <<'SQL'
CREATE TABLE regions (id SERIAL PRIMARY KEY, name TEXT NOT NULL, tier INT NOT NULL);
CREATE TABLE accounts (id SERIAL PRIMARY KEY, name TEXT NOT NULL, tier INT NOT NULL,
  region_id INT NOT NULL REFERENCES regions (id));
CREATE TABLE customers (id SERIAL PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL,
  tier INT NOT NULL, account_id INT NOT NULL REFERENCES accounts (id));
CREATE TABLE orders (id BIGSERIAL PRIMARY KEY, ref TEXT NOT NULL, status TEXT NOT NULL,
  amount NUMERIC(10,2) NOT NULL, tier INT NOT NULL, created_at TIMESTAMPTZ NOT NULL,
  customer_id INT NOT NULL REFERENCES customers (id));
INSERT INTO regions (name, tier) SELECT 'region ' || n, n % 4 FROM generate_series(1, 20) AS n;
INSERT INTO accounts (name, tier, region_id)
  SELECT 'account ' || n, n % 4, 1 + n % 20 FROM generate_series(1, 1000) AS n;
INSERT INTO customers (name, email, tier, account_id)
  SELECT 'customer ' || n, 'customer' || n || '@example.com', n % 4, 1 + n % 1000
  FROM generate_series(1, 10000) AS n;
INSERT INTO orders (ref, status, amount, tier, created_at, customer_id)
  SELECT 'R-' || lpad(n::text, 7, '0'),
    (ARRAY['pending', 'paid', 'shipped', 'delivered', 'refunded'])[1 + n % 5],
    (n % 100000) / 100.0, n % 4, TIMESTAMPTZ '2026-01-01' + n * INTERVAL '1 minute', 1 + n % 10000
  FROM generate_series(1, 1000000) AS n;
CREATE INDEX ON accounts (region_id);
CREATE INDEX ON customers (account_id);
CREATE INDEX ON orders (customer_id);
CREATE TABLE orders_10k (LIKE orders INCLUDING ALL);
ALTER TABLE orders_10k ADD FOREIGN KEY (customer_id) REFERENCES customers (id);
INSERT INTO orders_10k SELECT * FROM orders WHERE id <= 10000;
SQL
  for n in $(seq 1 50); do
    echo "CREATE TABLE p$n (id SERIAL PRIMARY KEY, name TEXT NOT NULL);"
    echo "INSERT INTO p$n (name) SELECT 'row ' || n FROM generate_series(1, 100) AS n;"
  done
  echo "VACUUM ANALYZE;"
} | psql -q -v ON_ERROR_STOP=1 -d "$DB"

# --- the server
PORT=$(free_port)
BASE="http://127.0.0.1:$PORT/forest"
bench_server_trap
export CANOPY_ADMIN_PASSWORD=scalebench-admin-password
STARTED_MS=0
start_server() { # start_server: serves the plugins of $WORK/plugins; sets STARTED_MS
  local t0
  t0=$(date +%s%N)
  "$BIN" serve --database-url "postgres://$PGUSER@$PGHOST:$PGPORT/$DB" \
    --auth-secret "$AUTH_SECRET" --env-secret "$ENV_SECRET" --plugins "$WORK/plugins" \
    --listen "127.0.0.1:$PORT" --schema-path "$WORK/.forestadmin-schema.json" \
    --data-dir "$WORK/.canopy" --log-level warn >>"$WORK/server.log" 2>&1 &
  PID=$!
  wait_serving "http://127.0.0.1:$PORT/forest" "$WORK/server.log" 120
  STARTED_MS=$((($(date +%s%N) - t0) / 1000000))
}
use_plugins() { # use_plugins <n>: copies 1..n of the plugin, the kth on table pk
  rm -rf "$WORK/plugins"
  mkdir -p "$WORK/plugins"
  local k
  for k in $(seq 1 "$1"); do
    cp "$PLUGIN_WASM" "$WORK/plugins/greeting$k.wasm"
    printf '[options]\ncollection = "p%d"\nfield = "name"\n' "$k" >"$WORK/plugins/greeting$k.toml"
  done
}
use_plugins 1
start_server
stop_server
TOKEN=$(admin_token "$BIN" "$WORK/.canopy" "$AUTH_SECRET")

wrk_lua "$WORK/wrk.lua"
HZ=$(getconf CLK_TCK)
measure() { # measure <label> <path> <rows per request>: one wrk run, one printed row
  local label=$1 path=$2 rows=$3 code before after result
  case $path in *\?*) path="$path&timezone=UTC" ;; *) path="$path?timezone=UTC" ;; esac
  code=$(curl -gs -o "$WORK/check.json" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$BASE$path")
  if [ "$code" != 200 ]; then echo "$label: HTTP $code" >&2; cat "$WORK/check.json" >&2; exit 1; fi
  echo 5 >"/proc/$PID/clear_refs" # resets VmHWM: the peak is this scenario's
  before=$(cpu_ticks)
  CANOPY_TOKEN=$TOKEN BENCH_PATH="/forest$path" \
    wrk -t "$THREADS" -c "$CONNECTIONS" -d "${DURATION}s" -s "$WORK/wrk.lua" "$BASE" >"$WORK/run.wrk" 2>&1
  after=$(cpu_ticks)
  result=$(grep '^RESULT' "$WORK/run.wrk") || { cat "$WORK/run.wrk" >&2; exit 1; }
  eval "${result#RESULT }" # requests= duration_us= p50_us= p99_us= errors= non2xx=
  # shellcheck disable=SC2154 # set by the eval above
  if [ "$non2xx" != 0 ] || [ "$errors" != 0 ]; then echo "$label: $errors errors, $non2xx non-2xx" >&2; exit 1; fi
  awk -v n="$label" -v r="$requests" -v d="$duration_us" -v p50="$p50_us" -v p99="$p99_us" \
    -v ticks=$((after - before)) -v hz="$HZ" -v rows="$rows" -v hwm="$(status_kb VmHWM)" \
    'BEGIN { cpu = ticks / hz * 1e6 / r
      # Below a few hundred requests the clock ticks of the idle server (timers, heartbeats)
      # outweigh the requests own: no CPU figure then.
      cpus = r >= 300 ? sprintf("%.1f", cpu) : "-"
      per_row = r >= 300 && rows > 0 ? sprintf("%.2f", cpu / rows) : "-"
      printf "%-38s %8.0f %8.2f %8.2f %9s %7s %7.1f\n", n, r / (d / 1e6), p50 / 1000, p99 / 1000,
        cpus, per_row, hwm / 1024 }'
}
header() {
  echo
  echo "$1"
  printf '%-38s %8s %8s %8s %9s %7s %7s\n' scenario 'req/s' 'p50 ms' 'p99 ms' 'CPU us/rq' 'us/row' 'HWM MB'
}
filter() { # filter <field> <operator> <value (JSON)>: the filters= parameter, URL-encoded
  python3 -c 'import json, sys, urllib.parse; print(urllib.parse.quote(json.dumps(
    {"field": sys.argv[1], "operator": sys.argv[2], "value": json.loads(sys.argv[3])})))' "$@"
}

start_server
ORDER_FIELDS='fields[orders]=id,ref,status,amount,created_at'

header "page size: orders (1M rows), sort -id, with the customer's email (one join)"
for size in 15 100 1000; do
  measure "list, page of $size" \
    "/orders?$ORDER_FIELDS,customer&fields[customer]=email&page[number]=1&page[size]=$size&sort=-id" "$size"
done

header "relation depth: orders list-15 filtered on tier = 1 through 0 to 3 to-one relations"
depth=0
for path in tier customer:tier customer:account:tier customer:account:region:tier; do
  measure "depth $depth ($path)" \
    "/orders?$ORDER_FIELDS&page[number]=1&page[size]=15&sort=-id&filters=$(filter "$path" equal 1)" 15
  depth=$((depth + 1))
done

header "table size: orders_10k against orders (1M rows)"
for table in orders_10k orders; do
  fields="fields[$table]=id,ref,status,amount,created_at"
  measure "$table list-15" "/$table?$fields&page[number]=1&page[size]=15&sort=-id" 15
  measure "$table count" "/$table/count" 0
  measure "$table search (no match)" "/$table?$fields&page[number]=1&page[size]=15&sort=-id&search=nomatch" 0
  measure "$table filter status=refunded" \
    "/$table?$fields&page[number]=1&page[size]=15&sort=-id&filters=$(filter status equal '"refunded"')" 15
  measure "$table count, status=refunded" "/$table/count?filters=$(filter status equal '"refunded"')" 0
done
stop_server

header "plugins loaded (copies of the scaffolded plugin, each on its own table)"
for n in 1 10 50; do
  use_plugins "$n"
  start_server
  rss=$(status_kb VmRSS)
  t0=$(date +%s%N)
  answer=$(curl -s -X POST -H "Authorization: Bearer $ENV_SECRET" "http://127.0.0.1:$PORT/_canopy/reload")
  reload_ms=$((($(date +%s%N) - t0) / 1000000))
  grep -q '"reloaded":true' <<<"$answer" || { echo "reload: $answer" >&2; exit 1; }
  echo "$n plugins: serving after ${STARTED_MS} ms (compiled plugins from the cache after the first), RSS $((rss / 1024)) MB, reload of all ${reload_ms} ms"
  measure "$n plugins: orders list-15" "/orders?$ORDER_FIELDS&page[number]=1&page[size]=15&sort=-id" 15
  measure "$n plugins: p1 list-15 + greeting" "/p1?fields[p1]=id,name,greeting&page[number]=1&page[size]=15&sort=-id" 15
  stop_server
done
echo
echo "work files: $WORK"

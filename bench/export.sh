#!/usr/bin/env bash
# The CSV export's cost as the table grows (issue 23): rows per second, the server's CPU time and
# its memory growth while it streams, at several table sizes, on PostgreSQL.
#
#   bash bench/export.sh                 # sizes 100000 300000 1000000
#   SIZES="10000 1000000" bash bench/export.sh
#
# What it does:
#   1. builds the release binary (or runs $CANOPY_BIN);
#   2. recreates the database $DB (default canopy_exportbench) with one table `lines` of the
#      largest size's rows (id, sku, qty, price numeric(10,2), created_at timestamptz), made by
#      generate_series;
#   3. starts `canopy serve` on it (no plugin, logs at warn) with its own store;
#   4. for each size, downloads `GET /forest/lines.csv` filtered on `id <= size` (the export's
#      default order, the primary key, so its pages follow the key) with curl into a file; prints
#      rows, seconds, rows/s, MB/s, the server's CPU time per row and its RSS before, its peak
#      (VmHWM, reset before each download) and the growth;
#   5. the same at the smallest size sorted by `qty` (a sort that is not the key, so its pages
#      are read at an offset: the cost that grows with the square of the rows, shown beside).
# Target (issue 23): 1M rows at >= 500k rows/s with <= 10 MB of RSS growth. The figures are for
# this machine; curl, PostgreSQL and the server share its cores. Linux only (/proc). Not run by CI.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi

DB=${DB:-canopy_exportbench}
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
PGUSER=${PGUSER:-postgres}
SIZES=${SIZES:-100000 300000 1000000}
WORK=${WORK:-$(mktemp -d /tmp/canopy-exportbench.XXXXXX)}
AUTH_SECRET=exportbench-auth-secret-not-for-production
ENV_SECRET=0000000000000000000000000000000000000000000000000000000000000000
export PGHOST PGPORT PGUSER
echo "work directory: $WORK"

if [ -n "${CANOPY_BIN:-}" ]; then
  BIN=$CANOPY_BIN
else
  cargo build --release --locked -p canopy --bin canopy
  BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/canopy
fi

largest=$(tr ' ' '\n' <<<"$SIZES" | sort -n | tail -1)
smallest=$(tr ' ' '\n' <<<"$SIZES" | sort -n | head -1)
echo "seeding $largest rows into $DB"
psql -q -v ON_ERROR_STOP=1 -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" 2>&1 \
  | grep -v 'does not exist, skipping' || true
psql -q -v ON_ERROR_STOP=1 -d "$DB" <<SQL
CREATE TABLE lines (id BIGSERIAL PRIMARY KEY, sku VARCHAR(20) NOT NULL, qty INT NOT NULL,
  price NUMERIC(10,2) NOT NULL, created_at TIMESTAMPTZ NOT NULL);
INSERT INTO lines (sku, qty, price, created_at)
  SELECT 'SKU-' || (n % 5000), n % 97, (n % 10000) / 100.0, TIMESTAMPTZ '2026-01-01' + n * INTERVAL '1 second'
  FROM generate_series(1, $largest) AS n;
VACUUM ANALYZE lines;
SQL

PORT=$(free_port)
bench_server_trap
export CANOPY_ADMIN_PASSWORD=exportbench-admin-password
mkdir -p "$WORK/plugins"
start() {
  "$BIN" serve --database-url "postgres://$PGUSER@$PGHOST:$PGPORT/$DB" \
    --auth-secret "$AUTH_SECRET" --env-secret "$ENV_SECRET" --plugins "$WORK/plugins" \
    --listen "127.0.0.1:$PORT" --schema-path "$WORK/.forestadmin-schema.json" \
    --data-dir "$WORK/.canopy" --log-level warn >>"$WORK/server.log" 2>&1 &
  PID=$!
  wait_serving "http://127.0.0.1:$PORT/forest" "$WORK/server.log" 30
}
start
stop_server
TOKEN=$(admin_token "$BIN" "$WORK/.canopy" "$AUTH_SECRET")
start

rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$PID/status"; }
export_once() { # export_once <rows> <extra query>: prints one result row
  local rows=$1 extra=$2 filter before ticks0 ticks1 peak seconds bytes lines
  filter=$(python3 -c 'import json, sys, urllib.parse; print(urllib.parse.quote(json.dumps(
    {"field": "id", "operator": "LessThanOrEqual", "value": int(sys.argv[1])})))' "$rows")
  before=$(rss_kb)
  # The kernel's high-water mark, reset here (`clear_refs` 5), is the peak: no sampler competes
  # with the server for the cores (one in a shell loop took a seventh of them).
  echo 5 >"/proc/$PID/clear_refs"
  ticks0=$(cpu_ticks)
  read -r seconds bytes < <(curl -gs -o "$WORK/export.csv" -w '%{time_total} %{size_download}\n' \
    -H "Authorization: Bearer $TOKEN" \
    "http://127.0.0.1:$PORT/forest/lines.csv?timezone=UTC&fields[lines]=id,sku,qty,price,created_at&header=id,sku,qty,price,created_at&filters=$filter$extra")
  ticks1=$(cpu_ticks)
  peak=$(awk '/^VmHWM/ { print $2 }' "/proc/$PID/status")
  lines=$(($(wc -l <"$WORK/export.csv") - 1))
  [ "$lines" = "$rows" ] || { echo "expected $rows rows, got $lines" >&2; exit 1; }
  python3 - "$rows" "$seconds" "$bytes" "$((ticks1 - ticks0))" "$(getconf CLK_TCK)" "$before" "$peak" "${extra:-&sort=id}" <<'PY'
import sys
rows, seconds, size, ticks, hz, before, peak, sort = sys.argv[1:]
rows, seconds, size, ticks, hz, before, peak = int(rows), float(seconds), int(size), int(ticks), int(hz), int(before), int(peak)
print(f"{rows:>9} {sort[1:]:>10} {seconds:8.2f} {rows / seconds:>10,.0f} {size / seconds / 1e6:7.1f}"
      f" {ticks / hz * 1e6 / rows:11.2f} {before / 1024:9.1f} {peak / 1024:8.1f} {(peak - before) / 1024:8.1f}")
PY
}

printf '%9s %10s %8s %10s %7s %11s %9s %8s %8s\n' rows sort seconds rows/s MB/s 'cpu us/row' 'RSS MB' peak growth
for size in $SIZES; do export_once "$size" ""; done
export_once "$smallest" "&sort=qty"

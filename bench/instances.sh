#!/usr/bin/env bash
# Throughput of 1, 2 and 3 `canopy serve` instances on one PostgreSQL store behind HAProxy
# (issue 25): list-15 and workflow webhook calls. Not run by CI.
#
#   bash bench/instances.sh
#   CANOPY_BIN=target/release/canopy DURATION=10 COUNTS="1 2 3" bash bench/instances.sh
#
# What it does:
#   1. builds the release binary (unless CANOPY_BIN names one);
#   2. recreates two PostgreSQL databases on 127.0.0.1:5432 (user postgres, trust): the shop's
#      data ($DATA_DB, default canopy_scale_data, examples/shop/seed.postgres.sql) and Canopy's
#      store ($STATE_DB, default canopy_scale_state), with a workflow whose webhook is enabled;
#   3. for each count N in $COUNTS (default "1 2 3"): starts N instances (ports 3371…), puts
#      HAProxy (Debian's package; `apt-get install haproxy`) in front of them (`balance
#      leastconn`, the docs' configuration), and runs wrk through it for $DURATION s (default
#      10) with $CONNECTIONS connections (default 16) and $THREADS threads (default 2):
#        list-15   GET /forest/orders?page[size]=15 (id, status, total; sort -id)
#        webhook   POST {the webhook URL} {"record_id": …}, the ids 1..5000 in turn: 202 when a
#                  run is accepted, 409 while a run of that record is still going (both answers)
#      and prints req/s, p50/p99 and the share of non-2xx answers; the store's runs table is
#      emptied between counts so each starts alike;
#   4. stops everything; the databases stay for inspection.
#
# Every process (the instances, HAProxy, PostgreSQL, wrk) shares this machine's cores: on two
# cores, more instances cannot add throughput, and the figures show what they cost (see
# docs/deployment.md, "How far several instances go").
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi

COUNTS=${COUNTS:-1 2 3}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-16}
THREADS=${THREADS:-2}
DATA_DB=${DATA_DB:-canopy_scale_data}
STATE_DB=${STATE_DB:-canopy_scale_state}
WORK=${WORK:-$(mktemp -d -t canopy-instances-XXXXXX)}
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
AUTH_SECRET=instances-auth-secret-0123456789abcdef
ENV_SECRET=$(printf '5%.0s' $(seq 64))

for tool in wrk haproxy psql; do
  command -v "$tool" >/dev/null || { echo "error: $tool is missing (apt-get install $tool)" >&2; exit 1; }
done
if [ -z "${CANOPY_BIN:-}" ]; then
  echo "==> building the release binary"
  cargo build --release --locked -p canopy
  CANOPY_BIN=target/release/canopy
fi
echo "==> work folder: $WORK"

echo "==> databases $DATA_DB (shop data) and $STATE_DB (store)"
for db in "$DATA_DB" "$STATE_DB"; do
  psql -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
done
psql -q -v ON_ERROR_STOP=1 -d "$DATA_DB" -f examples/shop/seed.postgres.sql >/dev/null

mkdir -p "$WORK/workflows"
cat >"$WORK/workflows/review.toml" <<'EOF'
# Reads an order and ends: the webhook's work in the store and the engine, without a plugin.
description = "Bench: read an order"
collection = "orders"

[[steps]]
key = "read"
type = "get-data"
fields = ["status", "total"]

[[steps]]
key = "done"
type = "end"
outcome = "succeeded"
message = "Read"
EOF
cat >"$WORK/canopy.toml" <<EOF
authSecret = "$AUTH_SECRET"
envSecret = "$ENV_SECRET"
stateUrl = "postgres://$PGUSER@$PGHOST:$PGPORT/$STATE_DB"
project = "bench"
workflowsDir = "$WORK/workflows"
workflowWebhookRateLimitPerMinute = 100000000
apiRateLimitPerMinute = 100000000
apiRateLimitPerMinutePerIp = 100000000

[[datasources]]
url = "postgres://$PGUSER@$PGHOST:$PGPORT/$DATA_DB"
EOF

pids=()
stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}
trap stop_all EXIT

start_instance() { # start_instance <n>: instance n on port 3370+n, until /readyz answers
  local port=$((3370 + $1))
  "$CANOPY_BIN" serve --config "$WORK/canopy.toml" --listen "127.0.0.1:$port" \
    --schema-path "$WORK/schema-$1.json" --log-level warn >"$WORK/instance-$1.out" \
    2>"$WORK/instance-$1.log" &
  pids+=("$!")
  for _ in $(seq 1 120); do
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && return 0
    sleep 0.5
  done
  echo "instance $1 did not start:" >&2
  cat "$WORK/instance-$1.log" >&2
  exit 1
}

# The first start migrates the store and creates the admin the CLI signs tokens for.
start_instance 1
cli() { "$CANOPY_BIN" "$@" --config "$WORK/canopy.toml"; }
SESSION=$(cli token --email admin@canopy.local)
cli workflows webhook enable review --public-url http://bench.test >/dev/null
WEBHOOK=$(cli workflows webhook url review --public-url http://bench.test | tail -n 1)
WEBHOOK_PATH=${WEBHOOK#http://bench.test}
API_TOKEN=$(cli tokens create --email admin@canopy.local --name bench --scope workflows:trigger |
  tail -n 1)
stop_all

wrk_lua "$WORK/list.lua"
cat >"$WORK/webhook.lua" <<'LUA'
local path = os.getenv("BENCH_PATH")
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("CANOPY_TOKEN")
wrk.headers["Content-Type"] = "application/json"
local counter = 0
request = function()
  counter = counter + 1
  return wrk.format("POST", path, nil, string.format('{"record_id": "%d"}', 1 + counter % 5000))
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d errors=%d non2xx=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, e.status))
end
LUA

HAPROXY_PORT=$(free_port)
run_wrk() { # run_wrk <label> <count> <script> <path> <token>
  local out line requests duration p50 p99 errors non2xx
  out=$(CANOPY_TOKEN=$5 BENCH_PATH=$4 wrk -t "$THREADS" -c "$CONNECTIONS" -d "${DURATION}s" \
    -s "$3" "http://127.0.0.1:$HAPROXY_PORT" 2>&1)
  line=$(grep '^RESULT' <<<"$out") || { echo "$out" >&2; exit 1; }
  requests=$(sed 's/.*requests=\([0-9]*\).*/\1/' <<<"$line")
  duration=$(sed 's/.*duration_us=\([0-9]*\).*/\1/' <<<"$line")
  p50=$(sed 's/.*p50_us=\([0-9]*\).*/\1/' <<<"$line")
  p99=$(sed 's/.*p99_us=\([0-9]*\).*/\1/' <<<"$line")
  errors=$(sed 's/.*errors=\([0-9]*\).*/\1/' <<<"$line")
  non2xx=$(sed 's/.*non2xx=\([0-9]*\).*/\1/' <<<"$line")
  awk -v l="$1" -v n="$2" -v r="$requests" -v d="$duration" -v p50="$p50" -v p99="$p99" \
    -v e="$errors" -v x="$non2xx" 'BEGIN {
      printf "%-9s %9d %10.0f %8.2f %8.2f %7d %7.1f%%\n", l, n, r / (d / 1e6), p50 / 1000, p99 / 1000, e, (r ? 100 * x / r : 0)
    }'
}

printf '%-9s %9s %10s %8s %8s %7s %8s\n' scenario instances "req/s" "p50 ms" "p99 ms" errors non-2xx
for count in $COUNTS; do
  psql -q -d "$STATE_DB" -c "TRUNCATE workflow_runs CASCADE" >/dev/null
  for i in $(seq 1 "$count"); do start_instance "$i"; done
  {
    echo "global"
    echo "    maxconn 4096"
    echo "defaults"
    echo "    mode http"
    echo "    timeout connect 5s"
    echo "    timeout client 60s"
    echo "    timeout server 60s"
    echo "frontend canopy"
    echo "    bind 127.0.0.1:$HAPROXY_PORT"
    echo "    default_backend canopy"
    echo "backend canopy"
    echo "    balance leastconn"
    echo "    option httpchk GET /readyz"
    echo "    http-check expect status 200"
    echo "    timeout check 3s"
    echo "    default-server inter 2s fall 2 rise 1"
    for i in $(seq 1 "$count"); do echo "    server i$i 127.0.0.1:$((3370 + i)) check"; done
  } >"$WORK/haproxy-$count.cfg"
  haproxy -f "$WORK/haproxy-$count.cfg" >"$WORK/haproxy-$count.log" 2>&1 &
  pids+=("$!")
  for _ in $(seq 1 50); do
    curl -sf -o /dev/null -H "authorization: Bearer $SESSION" \
      "http://127.0.0.1:$HAPROXY_PORT/forest/orders/count" && break
    sleep 0.2
  done
  run_wrk list-15 "$count" "$WORK/list.lua" \
    "/forest/orders?timezone=UTC&page[size]=15&sort=-id&fields[orders]=id,status,total" "$SESSION"
  run_wrk webhook "$count" "$WORK/webhook.lua" "$WEBHOOK_PATH" "$API_TOKEN"
  stop_all
done

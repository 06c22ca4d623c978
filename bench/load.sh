#!/usr/bin/env bash
# HTTP load benchmark of `canopy serve` on the shop demo data in PostgreSQL (issue 3, Performance).
#
#   bash bench/load.sh
#
# What it does:
#   1. builds the release binary (cargo build --release -p canopy);
#   2. recreates the database $DB (default canopy_loadbench) on $PGHOST:$PGPORT (default
#      127.0.0.1:5432, user postgres, trust auth) and loads
#      examples/shop/seed.postgres.sql, the PostgreSQL port of examples/shop/seed.sql (same rows,
#      also what the plugin end-to-end tests load);
#   3. starts `canopy serve` on a free loopback port in the background and mints a token;
#   4. runs wrk (installed with apt-get when missing, which needs root) for $DURATION seconds
#      (default 10) per scenario, $CONNECTIONS connections (16) and $THREADS threads (2):
#        list-15   GET /forest/orders?page[size]=15  (with the customer's email, sort -id)
#        list-100  GET /forest/orders?page[size]=100 (same fields)
#        count     GET /forest/orders/count
#        get-one   GET /forest/orders/{id}            (ids 1..5000 in turn)
#   5. prints one row per scenario: req/s, p50/p99 latency, the server process's CPU time per
#      request (utime+stime from /proc/<pid>/stat, before/after the scenario, divided by the
#      requests wrk completed), VmRSS sampled mid-scenario and VmHWM after it;
#   6. stops the server (also on error) and drops nothing: the database stays for inspection.
#
# Targets (issue 3): list-15 >= 15,000 req/s, <= 60 us server CPU per list-15 request,
# p99 <= 5 ms, RSS <= 64 MB. The figures are for this machine only: wrk, PostgreSQL and the
# server share its cores, so compare runs on the same machine. The server logs at
# CANOPY_LOG_LEVEL (default info, i.e. one line per request, as in production) into
# $WORK/server.log. Linux only (/proc). Not run by CI.
set -euo pipefail

cd "$(dirname "$0")/.."

DB=${DB:-canopy_loadbench}
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
PGUSER=${PGUSER:-postgres}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-16}
THREADS=${THREADS:-2}
WORK=${WORK:-$(mktemp -d /tmp/canopy-loadbench.XXXXXX)}
AUTH_SECRET=loadbench-auth-secret-not-for-production
ENV_SECRET=0000000000000000000000000000000000000000000000000000000000000000
export PGHOST PGPORT PGUSER

# --- load generator ---------------------------------------------------------------------------
if ! command -v wrk >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "wrk is missing; install it (apt-get install -y wrk) or run as root" >&2
    exit 1
  fi
  apt-get install -y wrk >/dev/null || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }
fi

# --- binary -------------------------------------------------------------------------------------
cargo build --release -p canopy
BIN=$PWD/target/release/canopy

# --- database -----------------------------------------------------------------------------------
psql -q -v ON_ERROR_STOP=1 -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" 2>&1 \
  | grep -v 'does not exist, skipping' || true
psql -q -v ON_ERROR_STOP=1 -d "$DB" -f examples/shop/seed.postgres.sql

# --- server -------------------------------------------------------------------------------------
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
BASE="http://127.0.0.1:$PORT/forest"
"$BIN" serve \
  --database-url "postgres://$PGUSER@$PGHOST:$PGPORT/$DB" \
  --auth-secret "$AUTH_SECRET" --env-secret "$ENV_SECRET" \
  --listen "127.0.0.1:$PORT" --schema-path "$WORK/.forestadmin-schema.json" \
  >"$WORK/server.log" 2>&1 &
PID=$!
trap 'kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true' EXIT

TOKEN=$("$BIN" token --email loadbench@canopy.local --auth-secret "$AUTH_SECRET")
for _ in $(seq 100); do
  curl -fs -o /dev/null "http://127.0.0.1:$PORT/forest" && break
  kill -0 "$PID" 2>/dev/null || { echo "server died:" >&2; cat "$WORK/server.log" >&2; exit 1; }
  sleep 0.1
done

# --- scenarios ----------------------------------------------------------------------------------
TZ_Q='timezone=Europe/Paris'
FIELDS='fields[orders]=id,status,total,ordered_at,shipped_on,customer&fields[customer]=email'
declare -a NAMES=(list-15 list-100 count get-one)
declare -A PATHS=(
  [list-15]="/orders?$TZ_Q&$FIELDS&page[number]=1&page[size]=15&sort=-id"
  [list-100]="/orders?$TZ_Q&$FIELDS&page[number]=1&page[size]=100&sort=-id"
  [count]="/orders/count?$TZ_Q"
  [get-one]="/orders/ID?$TZ_Q"
)

# wrk script: the session header, get-one cycling through ids, and a machine-readable summary.
cat >"$WORK/wrk.lua" <<'LUA'
local token = os.getenv("CANOPY_TOKEN")
local path = os.getenv("BENCH_PATH")
wrk.headers["Authorization"] = "Bearer " .. token
if path:find("/ID?", 1, true) then
  local counter = 0
  request = function()
    counter = counter + 1
    local p = path:gsub("/ID%?", "/" .. tostring(1 + counter % 5000) .. "?")
    return wrk.format("GET", p)
  end
else
  wrk.path = path
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d errors=%d non2xx=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, e.status))
end
LUA

cpu_ticks() { # utime + stime of $PID, in clock ticks (fields 14 and 15; comm may hold spaces)
  local stat
  stat=$(<"/proc/$PID/stat")
  stat=${stat##*) }
  awk '{ print $12 + $13 }' <<<"$stat"
}
status_kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$PID/status"; }

HZ=$(getconf CLK_TCK)
ROWS=()
for name in "${NAMES[@]}"; do
  path=${PATHS[$name]}
  # Every scenario must answer 200 before it is measured.
  code=$(curl -gs -o "$WORK/$name.json" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$BASE${path/\/ID\?//1?}")
  if [ "$code" != 200 ]; then
    echo "$name: HTTP $code" >&2; cat "$WORK/$name.json" >&2; echo >&2; exit 1
  fi

  before=$(cpu_ticks)
  CANOPY_TOKEN=$TOKEN BENCH_PATH="/forest$path" \
    wrk -t "$THREADS" -c "$CONNECTIONS" -d "${DURATION}s" -s "$WORK/wrk.lua" "$BASE" >"$WORK/$name.wrk" 2>&1 &
  wrk_pid=$!
  sleep "$(awk -v d="$DURATION" 'BEGIN { print d / 2 }')"
  rss_kb=$(status_kb VmRSS)
  wait "$wrk_pid"
  after=$(cpu_ticks)
  hwm_kb=$(status_kb VmHWM)

  result=$(grep '^RESULT' "$WORK/$name.wrk") || { cat "$WORK/$name.wrk" >&2; exit 1; }
  eval "${result#RESULT }" # requests= duration_us= p50_us= p99_us= errors= non2xx=
  # shellcheck disable=SC2154 # set by the eval above
  ROWS+=("$(awk -v n="$name" -v r="$requests" -v d="$duration_us" -v p50="$p50_us" -v p99="$p99_us" \
    -v ticks=$((after - before)) -v hz="$HZ" -v rss="$rss_kb" -v hwm="$hwm_kb" -v err="$errors" -v bad="$non2xx" \
    'BEGIN { printf "%-9s %9d %10.0f %9.2f %9.2f %9.1f %8.1f %8.1f %6d %6d\n",
      n, r, r / (d / 1e6), p50 / 1000, p99 / 1000, ticks / hz * 1e6 / r, rss / 1024, hwm / 1024, err, bad }')")
done

echo
echo "canopy serve on PostgreSQL $DB: ${CONNECTIONS} connections, ${THREADS} wrk threads, ${DURATION} s per scenario, $(nproc) CPUs"
printf "%-9s %9s %10s %9s %9s %9s %8s %8s %6s %6s\n" \
  scenario requests "req/s" "p50 ms" "p99 ms" "CPU us/rq" "RSS MB" "HWM MB" errors non2xx
printf '%s\n' "${ROWS[@]}"
echo "targets: list-15 >= 15000 req/s, <= 60 us CPU/request, p99 <= 5 ms, RSS <= 64 MB"
echo "work files (wrk output, server log): $WORK"

#!/usr/bin/env bash
# Two builds of `canopy serve` side by side on the same data, alternately, in one run.
#
#   bash bench/compare.sh A B          # A and B are commits (or anything `git rev-parse` takes)
#   A_BIN=path B_BIN=path bash bench/compare.sh A B   # compare two binaries already built
#
# What it does:
#   1. builds each commit's release binary in a detached worktree under $WORK, sharing one
#      target directory ($CARGO_TARGET_DIR, default target/compare) so the dependencies build
#      once; and the shop plugin once (from the current tree: both builds load the same bytes);
#   2. recreates the database $DB (default canopy_compare) with examples/shop/seed.postgres.sql;
#   3. gives each build a Canopy store of its own (bootstrapped by its first start), so that a
#      store migration of one does not change the other's;
#   4. for $ROUNDS rounds (default 3), starts A, then B, each freshly, and runs wrk on each
#      scenario (list-15 and get-one, as in bench/load.sh) for $DURATION s (default 10) with
#      $CONNECTIONS connections (16): req/s, p50 and p99, and the server's CPU time per request;
#   5. counts the server's instructions per request, the figure that noise does not move:
#      with `perf stat -e instructions` where the machine's PMU allows it, else under
#      `valgrind --tool=callgrind` with collection off until the server is warm, over
#      $INSTR_REQUESTS (default 200) sequential list-15 requests (under valgrind without the
#      plugin: wasmtime's pooling allocator cannot reserve its address space there);
#   6. prints one row per build and scenario (the median of the rounds) and B against A.
# Linux only (/proc). Not run by CI. The figures are for this machine: compare runs on one
# machine, and prefer the instructions column on a shared one.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
# shellcheck source=bench/lib.sh
source bench/lib.sh

if [ $# -ne 2 ] || [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi

DB=${DB:-canopy_compare}
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
PGUSER=${PGUSER:-postgres}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-16}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
INSTR_REQUESTS=${INSTR_REQUESTS:-200}
WORK=${WORK:-$(mktemp -d /tmp/canopy-compare.XXXXXX)}
AUTH_SECRET=compare-auth-secret-not-for-production
ENV_SECRET=0000000000000000000000000000000000000000000000000000000000000000
export PGHOST PGPORT PGUSER CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target/compare}
echo "work directory: $WORK"

for tool in wrk valgrind; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: apt-get install -y $tool" >&2; exit 1; }
done

# --- the two binaries ---------------------------------------------------------------------------
build() { # build <label> <commit>: prints the binary's path
  local label=$1 commit sha dir
  commit=$(git rev-parse --verify "$2^{commit}") || { echo "not a commit: $2" >&2; exit 1; }
  sha=${commit:0:10}
  if [ -x "$WORK/canopy-$sha" ]; then echo "$WORK/canopy-$sha"; return; fi
  dir=$WORK/src-$sha
  [ -d "$dir" ] || git worktree add --detach --quiet "$dir" "$commit"
  echo "building $label ($sha) in release..." >&2
  (cd "$dir" && cargo build --release --locked --quiet -p canopy --bin canopy) >&2
  cp "$CARGO_TARGET_DIR/release/canopy" "$WORK/canopy-$sha"
  git worktree remove --force "$dir"
  echo "$WORK/canopy-$sha"
}
A_BIN=${A_BIN:-$(build A "$1")}
B_BIN=${B_BIN:-$(build B "$2")}
(cd examples/shop/plugin && cargo build --release --target wasm32-wasip2 --target-dir target --quiet)
mkdir -p "$WORK/plugins"
cp examples/shop/plugin/target/wasm32-wasip2/release/shop_plugin.wasm "$WORK/plugins/shop.wasm"

# --- database -----------------------------------------------------------------------------------
psql -q -v ON_ERROR_STOP=1 -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" 2>&1 \
  | grep -v 'does not exist, skipping' || true
psql -q -v ON_ERROR_STOP=1 -d "$DB" -f examples/shop/seed.postgres.sql
psql -q -d "$DB" -c 'VACUUM ANALYZE'

# --- servers ------------------------------------------------------------------------------------
PORT=$(free_port)
BASE="http://127.0.0.1:$PORT/forest"
bench_server_trap
export CANOPY_ADMIN_PASSWORD=compare-admin-password
start_server() { # start_server <label> <binary> [wrapper...]: serves until stop_server
  local label=$1 bin=$2
  shift 2
  mkdir -p "$WORK/$label"
  "$@" "$bin" serve \
    --database-url "postgres://$PGUSER@$PGHOST:$PGPORT/$DB" \
    --auth-secret "$AUTH_SECRET" --env-secret "$ENV_SECRET" --plugins "${PLUGINS:-$WORK/plugins}" \
    --listen "127.0.0.1:$PORT" --schema-path "$WORK/$label/.forestadmin-schema.json" \
    --data-dir "$WORK/$label/.canopy" --log-level "${CANOPY_LOG_LEVEL:-info}" \
    >>"$WORK/$label/server.log" 2>&1 &
  PID=$!
  # Under valgrind the start takes minutes (it compiles nothing: the plugin cache is warm).
  wait_serving "http://127.0.0.1:$PORT/forest" "$WORK/$label/server.log" 600
}
# A first start bootstraps each build's store (the same admin, id 1, in both), so that one
# admin token serves both.
for label in A B; do
  bin=A_BIN; [ $label = B ] && bin=B_BIN
  start_server "$label" "${!bin}"
  stop_server
done
TOKEN=$(admin_token "$A_BIN" "$WORK/A/.canopy" "$AUTH_SECRET")

TZ_Q='timezone=Europe/Paris'
FIELDS='fields[orders]=id,status,total,ordered_at,shipped_on,customer&fields[customer]=email'
NAMES=(list-15 get-one)
declare -A PATHS=(
  [list-15]="/orders?$TZ_Q&$FIELDS&page[number]=1&page[size]=15&sort=-id"
  [get-one]="/orders/ID?$TZ_Q"
)
wrk_lua "$WORK/wrk.lua"
check() { # check <path>: one request, which must answer 200
  local code
  code=$(curl -gs -o "$WORK/check.json" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$BASE${1/\/ID\?//1?}")
  [ "$code" = 200 ] || { echo "$1: HTTP $code" >&2; cat "$WORK/check.json" >&2; exit 1; }
}
HZ=$(getconf CLK_TCK)

# --- throughput, alternately --------------------------------------------------------------------
: >"$WORK/rows"
for round in $(seq "$ROUNDS"); do
  for label in A B; do
    bin=A_BIN; [ $label = B ] && bin=B_BIN
    start_server "$label" "${!bin}"
    for name in "${NAMES[@]}"; do
      check "${PATHS[$name]}"
      # A short warm-up: connections, prepared statements and caches, as in steady state.
      CANOPY_TOKEN=$TOKEN BENCH_PATH="/forest${PATHS[$name]}" \
        wrk -t "$THREADS" -c "$CONNECTIONS" -d 2s -s "$WORK/wrk.lua" "$BASE" >/dev/null
      before=$(cpu_ticks)
      CANOPY_TOKEN=$TOKEN BENCH_PATH="/forest${PATHS[$name]}" \
        wrk -t "$THREADS" -c "$CONNECTIONS" -d "${DURATION}s" -s "$WORK/wrk.lua" "$BASE" >"$WORK/wrk.out"
      after=$(cpu_ticks)
      result=$(grep '^RESULT' "$WORK/wrk.out") || { cat "$WORK/wrk.out" >&2; exit 1; }
      eval "${result#RESULT }" # requests= duration_us= p50_us= p99_us= errors= non2xx=
      # shellcheck disable=SC2154 # set by the eval above
      failed=$((errors + non2xx))
      awk -v l="$label" -v n="$name" -v r="$requests" -v d="$duration_us" -v p50="$p50_us" -v p99="$p99_us" \
        -v t=$((after - before)) -v hz="$HZ" -v f="$failed" \
        'BEGIN { printf "%s %s %.0f %.2f %.2f %.1f %d\n", l, n, r / (d / 1e6), p50 / 1000, p99 / 1000, t / hz * 1e6 / r, f }' \
        >>"$WORK/rows"
      printf 'round %d %s %-8s %s\n' "$round" "$label" "$name" "$(tail -1 "$WORK/rows" | cut -d' ' -f3-)"
    done
    stop_server
  done
done

# --- instructions per request -------------------------------------------------------------------
declare -A INSTR
perf_ok=
if command -v perf >/dev/null && perf stat -x, -e instructions true 2>&1 | grep -q '^[0-9]'; then perf_ok=1; fi
requests() { # requests <n>: n sequential list-15 requests
  for _ in $(seq "$1"); do
    curl -gs -o /dev/null -H "Authorization: Bearer $TOKEN" "$BASE${PATHS[list-15]}"
  done
}
for label in A B; do
  bin=A_BIN; [ $label = B ] && bin=B_BIN
  if [ -n "$perf_ok" ]; then
    start_server "$label" "${!bin}"
    requests 50
    perf stat -x, -e instructions -p "$PID" -o "$WORK/$label/perf.csv" -- sleep 1000 &
    perf_pid=$!
    sleep 0.5
    requests "$INSTR_REQUESTS"
    kill -INT "$perf_pid"; wait "$perf_pid" || true
    total=$(awk -F, '/instructions/ { print $1 }' "$WORK/$label/perf.csv")
    how=perf
  else
    # Collection starts off; it is switched on once the server is warm, and the counters
    # are dumped after the measured requests. The process total is the figure. Under valgrind
    # wasmtime cannot reserve its pooling allocator's address space, so both builds serve
    # without the plugin here: the figure is the host's path alone.
    mkdir -p "$WORK/no-plugins"
    PLUGINS=$WORK/no-plugins start_server "$label" "${!bin}" valgrind --tool=callgrind --instr-atstart=no \
      --callgrind-out-file="$WORK/$label/callgrind.%p" --log-file="$WORK/$label/valgrind.log"
    requests 20
    callgrind_control -i on "$PID" >/dev/null
    requests "$INSTR_REQUESTS"
    callgrind_control -d "$PID" >/dev/null
    sleep 1
    # awk reads the dump itself: `cat | awk … exit` would end on SIGPIPE under pipefail.
    total=$(awk '/^summary:|^totals:/ { print $2; exit }' "$WORK/$label"/callgrind.*.1 2>/dev/null || true)
    how=callgrind
  fi
  stop_server
  INSTR[$label]=$(awk -v t="${total:-0}" -v n="$INSTR_REQUESTS" 'BEGIN { printf "%.0f", t / n }')
done

# --- report -------------------------------------------------------------------------------------
echo
echo "A = $1 ($A_BIN)"
echo "B = $2 ($B_BIN)"
echo "median of $ROUNDS rounds of ${DURATION}s, $CONNECTIONS connections; instructions by $how over $INSTR_REQUESTS requests"
printf '%-8s %-3s %9s %8s %8s %9s %7s\n' scenario run 'req/s' 'p50 ms' 'p99 ms' 'cpu us/r' failed
# ROUNDS=0 counts the instructions only.
[ "$ROUNDS" -gt 0 ] && for name in "${NAMES[@]}"; do
  for label in A B; do
    col() { awk -v l="$label" -v n="$name" -v c="$1" '$1 == l && $2 == n { print $c }' "$WORK/rows" | median; }
    printf '%-8s %-3s %9.0f %8.2f %8.2f %9.1f %7d\n' "$name" "$label" "$(col 3)" "$(col 4)" "$(col 5)" "$(col 6)" \
      "$(awk -v l="$label" -v n="$name" '$1 == l && $2 == n { s += $7 } END { print s + 0 }' "$WORK/rows")"
  done
done
printf 'instructions per list-15 request: A %s, B %s (B/A %s)\n' "${INSTR[A]}" "${INSTR[B]}" \
  "$(awk -v a="${INSTR[A]}" -v b="${INSTR[B]}" 'BEGIN { if (a > 0) printf "%.3f", b / a; else print "n/a" }')"

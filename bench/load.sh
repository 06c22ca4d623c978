#!/usr/bin/env bash
# HTTP load benchmark of `canopy serve` on the shop demo data in PostgreSQL (issues 3 and 10).
#
#   bash bench/load.sh
#
# What it does:
#   1. builds the release binary (cargo build --release -p canopy) and the shop plugin
#      (examples/shop/plugin, wasm32-wasip2), which the server loads from a plugin directory;
#   2. recreates the database $DB (default canopy_loadbench) on $PGHOST:$PGPORT (default
#      127.0.0.1:5432, user postgres, trust auth) and loads examples/shop/seed.postgres.sql;
#   3. starts `canopy serve` once with `canopy::sql=trace` to record the SQL (and binds) that each
#      scenario sends, then again at the production log level for the measurements;
#   4. runs wrk (installed with apt-get when missing, which needs root) for $DURATION seconds
#      (default 10) per scenario, $CONNECTIONS connections (16) and $THREADS threads (2):
#        list-15        GET /forest/orders?page[size]=15  (with the customer's email, sort -id)
#        list-100       GET /forest/orders?page[size]=100 (same fields)
#        count          GET /forest/orders/count
#        get-one        GET /forest/orders/{id}            (ids 1..5000 in turn)
#        cust-15        GET /forest/customers?page[size]=15  (id, email, first and last name)
#        cust-15+fn     the same plus `full_name`, the shop plugin's computed field
#        cust-100       GET /forest/customers?page[size]=100
#        cust-100+fn    the same plus `full_name`
#        user-15        list-15 as a non-admin user (role Support, team Ops, level user) whose team
#                       has a scope on orders with a `{{currentUser.tags.*}}` variable
#        user-cust-15+fn  cust-15+fn as that user, with a scope on customers (`{{currentUser.email}}`)
#      then pgbench (-M prepared, the same connections and duration) on each scenario's SQL, the
#      floor that the database alone allows on this machine;
#   5. prints one row per scenario: req/s, p50/p99 latency, the server process's CPU time per
#      request (utime+stime from /proc/<pid>/stat, before/after the scenario, divided by the
#      requests wrk completed), VmRSS sampled mid-scenario and VmHWM after it, pgbench's rate of
#      the same SQL and Canopy's rate as a share of it; then the cost of the computed field (the
#      +fn rows against the rows without), and the cost of permission checks and scopes (the
#      user-* rows against the admin's; the admin's requests are checked too, without scope);
#   6. reload under load: wrk on list-15 while the shop plugin is replaced by a changed build (one
#      message edited in a copy of its source: most functions are as before) and
#      `POST /_canopy/reload` swaps it in; prints the reload's duration, wrk's failures during it,
#      and when the changed plugin's Cranelift code was swapped in after its quick (Winch) code;
#   7. activity logging (issue 12): list-15 on a server with the activity log on (the default,
#      as in every scenario above) and on one with --activity-logs=false, alternately, on a freshly
#      started server each time, $ACTIVITY_ROUNDS pairs (default 2) of $DURATION s; prints both
#      rates, the cost of logging as a share of the throughput, and the entries written (a SQLite
#      count in the store) and dropped (the server's "buffer full" warnings); ACTIVITY_ROUNDS=0
#      skips it;
#   8. stops the server (also on error) and drops nothing: the database stays for inspection.
#
# Only the activity-log comparison: ONLY_ACTIVITY=1 bash bench/load.sh (skips steps 3 to 6).
# CANOPY_BIN=path runs that binary instead of building one (to compare two builds on the same
# data). PROFILE=1 also records each activity-log run's server with `perf record` (sampled
# functions of every thread, a flat profile) into $WORK/perf-{on,off}-<round>.data; read them with
# `perf report -i FILE --no-children --sort dso,symbol`.
#
# Targets (issue 23): list-15 and get-one >= 45% of pgbench, list-15 p99 <= 4 ms at 16
# connections, the computed field costs <= 5% on a page of 15 and <= 10% on a page of 100, RSS
# high-water mark <= 48 MB, a reload under load <= 300 ms with no failed request. Issue 11: a
# non-admin user's checks and scope cost <= 5% of list-15's throughput. Issue 12: list-15 with
# activity logging on within 5% of logging off.
# Canopy's own store is a SQLite file in $WORK/.canopy (bootstrapped by a first start, then
# seeded with the user, role, team, rendering and rights of the user-* scenarios).
# The figures are for this machine only: wrk, PostgreSQL and the server share its cores, so
# compare runs on the same machine. The server
# logs at CANOPY_LOG_LEVEL (default info, i.e. one line per request, as in production) into
# $WORK/server.log. Linux only (/proc). Not run by CI.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

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

# --- binary and plugin ---------------------------------------------------------------------------
if [ -n "${CANOPY_BIN:-}" ]; then
  BIN=$CANOPY_BIN
else
  cargo build --release -p canopy
  BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/canopy
fi
(cd examples/shop/plugin && cargo build --release --target wasm32-wasip2 --target-dir target --quiet)
mkdir -p "$WORK/plugins"
cp examples/shop/plugin/target/wasm32-wasip2/release/shop_plugin.wasm "$WORK/plugins/shop.wasm"
# The plugin the reload step swaps in: the same source with one message changed, built from a copy
# (into a target folder of its own under the example's, kept between runs).
rm -rf "$WORK/changed-plugin" && mkdir -p "$WORK/changed-plugin"
cp -r examples/shop/plugin/Cargo.toml examples/shop/plugin/Cargo.lock examples/shop/plugin/src "$WORK/changed-plugin/"
sed -i "s|path = \"../../../guest-sdk\"|path = \"$PWD/guest-sdk\"|" "$WORK/changed-plugin/Cargo.toml"
sed -i 's/sent to {name}"/sent to {name}!"/' "$WORK/changed-plugin/src/lib.rs"
grep -q 'sent to {name}!"' "$WORK/changed-plugin/src/lib.rs" || { echo "the reload step's change no longer applies to the shop plugin" >&2; exit 1; }
(cd "$WORK/changed-plugin" && cargo build --release --target wasm32-wasip2 --quiet \
  --target-dir "$OLDPWD/examples/shop/plugin/target/changed")
CHANGED_PLUGIN=examples/shop/plugin/target/changed/wasm32-wasip2/release/shop_plugin.wasm
# A compile cache of this run's own: the start compiles the plugin in full (filling the function
# cache), and the reload then compiles only the functions the change touched, as after a real edit.
export CANOPY_PLUGIN_CACHE_DIR=$WORK/plugin-cache

# --- database -----------------------------------------------------------------------------------
psql -q -v ON_ERROR_STOP=1 -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" 2>&1 \
  | grep -v 'does not exist, skipping' || true
psql -q -v ON_ERROR_STOP=1 -d "$DB" -f examples/shop/seed.postgres.sql
psql -q -d "$DB" -c 'VACUUM ANALYZE'

# --- server -------------------------------------------------------------------------------------
PORT=$(free_port)
BASE="http://127.0.0.1:$PORT/forest"
SERVE_EXTRA=() # extra flags of `canopy serve` (the activity-log comparison sets them)
bench_server_trap
start_server() { # start_server <log level> <log format> <log file>
  : >"$3"
  "$BIN" serve \
    --database-url "postgres://$PGUSER@$PGHOST:$PGPORT/$DB" \
    --auth-secret "$AUTH_SECRET" --env-secret "$ENV_SECRET" --plugins "$WORK/plugins" \
    --listen "127.0.0.1:$PORT" --schema-path "$WORK/.forestadmin-schema.json" \
    --data-dir "$WORK/.canopy" ${SERVE_EXTRA[@]+"${SERVE_EXTRA[@]}"} \
    --log-level "$1" --log-format "$2" >>"$3" 2>&1 & # appended: the markers below go in between
  PID=$!
  wait_serving "http://127.0.0.1:$PORT/forest" "$3" 30
}

# --- Canopy's store: a first start bootstraps it (admin id 1, role Admin with every right);
# then the non-admin user of the user-* scenarios is written into it while no server runs.
export CANOPY_ADMIN_PASSWORD=loadbench-admin-password
start_server warn text "$WORK/bootstrap.log"
stop_server
TOKEN=$(admin_token "$BIN" "$WORK/.canopy" "$AUTH_SECRET")
USER_TOKEN=$(python3 - "$WORK/.canopy/canopy.sqlite" "$AUTH_SECRET" <<'PY'
import base64, hashlib, hmac, json, sqlite3, sys, time
path, secret = sys.argv[1], sys.argv[2]
db = sqlite3.connect(path)
now = int(time.time() * 1000)
project, env = "canopy", "production"
def one(sql, *args):
    return db.execute(sql, args).fetchone()[0]
db.execute("INSERT INTO roles (project, name, created_at) VALUES (?, 'Support', ?)", (project, now))
support = one("SELECT id FROM roles WHERE project = ? AND name = 'Support'", project)
db.execute("INSERT INTO teams (project, name, created_at) VALUES (?, 'Ops', ?)", (project, now))
ops = one("SELECT id FROM teams WHERE project = ? AND name = 'Ops'", project)
tags = {"hidden_status": "cancelled"}
db.execute("INSERT INTO users (project, email, first_name, last_name, permission_level, role_id, tags,"
           " created_at, updated_at) VALUES (?, 'bench-user@canopy.local', 'Bench', 'User', 'user', ?, ?, ?, ?)",
           (project, support, json.dumps(tags), now, now))
user = one("SELECT id FROM users WHERE project = ? AND email = 'bench-user@canopy.local'", project)
db.execute("INSERT INTO team_members (team_id, user_id, position) VALUES (?, ?, 0)", (ops, user))
# The admin token says rendering 1: the admin's team (Operations) gets it, without scopes.
operations = one("SELECT id FROM teams WHERE project = ? AND name = 'Operations'", project)
for team, document in [(operations, {}), (ops, {"collections": {
    "orders": {"scope": {"field": "status", "operator": "not_equal",
                         "value": "{{currentUser.tags.hidden_status}}"}},
    "customers": {"scope": {"field": "email", "operator": "not_equal", "value": "{{currentUser.email}}"}},
}})]:
    # The first start already made the admin team's rendering: replaced, not added.
    db.execute("INSERT INTO renderings (project, environment, team_id, document, updated_at) VALUES (?, ?, ?, ?, ?)"
               " ON CONFLICT (project, environment, team_id) DO UPDATE SET document = excluded.document,"
               " updated_at = excluded.updated_at",
               (project, env, team, json.dumps(document), now))
rendering = one("SELECT id FROM renderings WHERE project = ? AND environment = ? AND team_id = ?", project, env, ops)
# Support browses and reads orders and customers (and customers through orders' relation).
document = json.loads(one("SELECT document FROM environment_permissions WHERE project = ? AND environment = ?", project, env))
collections = document["collections"]
for name in ("orders", "customers"):
    # The first start grants every collection at once (`*`); these two get entries of their own.
    rights = collections.setdefault(name, json.loads(json.dumps(collections["*"])))["collection"]
    for right in ("browseEnabled", "readEnabled"):
        rights[right]["roles"].append(support)
db.execute("UPDATE environment_permissions SET document = ? WHERE project = ? AND environment = ?",
           (json.dumps(document), project, env))
db.commit()
def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
iat = int(time.time())
claims = {"id": user, "email": "bench-user@canopy.local", "firstName": "Bench", "lastName": "User",
          "team": "Ops", "role": "Support", "permissionLevel": "user", "renderingId": rendering,
          "tags": tags, "iat": iat, "exp": iat + 86400}
head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." + b64(json.dumps(claims).encode())
print(head + "." + b64(hmac.new(secret.encode(), head.encode(), hashlib.sha256).digest()))
PY
)

# --- scenarios ----------------------------------------------------------------------------------
TZ_Q='timezone=Europe/Paris'
FIELDS='fields[orders]=id,status,total,ordered_at,shipped_on,customer&fields[customer]=email'
CUST='fields[customers]=id,email,first_name,last_name'
declare -a NAMES=(list-15 list-100 count get-one cust-15 cust-15+fn cust-100 cust-100+fn user-15 user-cust-15+fn)
declare -A PATHS=(
  [list-15]="/orders?$TZ_Q&$FIELDS&page[number]=1&page[size]=15&sort=-id"
  [list-100]="/orders?$TZ_Q&$FIELDS&page[number]=1&page[size]=100&sort=-id"
  [count]="/orders/count?$TZ_Q"
  [get-one]="/orders/ID?$TZ_Q"
  [cust-15]="/customers?$TZ_Q&$CUST&page[number]=1&page[size]=15&sort=-id"
  [cust-15+fn]="/customers?$TZ_Q&$CUST,full_name&page[number]=1&page[size]=15&sort=-id"
  [cust-100]="/customers?$TZ_Q&$CUST&page[number]=1&page[size]=100&sort=-id"
  [cust-100+fn]="/customers?$TZ_Q&$CUST,full_name&page[number]=1&page[size]=100&sort=-id"
  [user-15]="/orders?$TZ_Q&$FIELDS&page[number]=1&page[size]=15&sort=-id"
  [user-cust-15+fn]="/customers?$TZ_Q&$CUST,full_name&page[number]=1&page[size]=15&sort=-id"
)
token_of() { case $1 in user-*) echo "$USER_TOKEN" ;; *) echo "$TOKEN" ;; esac; }
get() { # get <path> <out file> [token]: one request, which must answer 200
  local code
  code=$(curl -gs -o "$2" -w '%{http_code}' -H "Authorization: Bearer ${3:-$TOKEN}" "$BASE${1/\/ID\?//1?}")
  if [ "$code" != 200 ]; then echo "$1: HTTP $code" >&2; cat "$2" >&2; echo >&2; exit 1; fi
}

if [ -z "${ONLY_ACTIVITY:-}" ]; then
# Pass 1: record each scenario's SQL. `canopy::sql=trace` logs every read with its binds; the
# statements of one request are the lines between two markers (a request to the healthcheck).
start_server 'warn,canopy::sql=trace' json "$WORK/sql.log"
for name in "${NAMES[@]}"; do
  get "${PATHS[$name]}" "$WORK/$name.json" "$(token_of "$name")"
  sleep 0.2 # the log is flushed every 50 ms; keep each scenario's lines apart
  printf '{"scenario":"%s"}\n' "$name" >>"$WORK/sql.log"
done
stop_server
python3 - "$WORK" "${NAMES[@]}" <<'PY'
# Writes <scenario>.pgbench: the scenario's statements with their binds inlined as literals.
import json, re, sys
work, names = sys.argv[1], sys.argv[2:]
statements, current = {}, []
for line in open(f"{work}/sql.log"):
    try:
        event = json.loads(line)
    except ValueError:
        continue
    if "scenario" in event:
        statements[event["scenario"]] = current
        current = []
    elif event.get("target") == "canopy::sql":
        current.append((event["sql"], event.get("binds", "[]")))
def literal(bind):
    kind, value = re.fullmatch(r'(\w+)\((.*)\)', bind.strip()).groups()
    if kind in ("Int", "Float", "Decimal", "Bool"):
        return value.lower()
    if kind == "Text":
        return "'" + json.loads(value).replace("'", "''") + "'"
    raise SystemExit(f"bench/load.sh: cannot inline the bind {bind}")
for name in names:
    lines = []
    for sql, binds in statements.get(name, []):
        values = [literal(b) for b in re.findall(r'\w+\((?:"(?:[^"\\]|\\.)*"|[^()]*)\)', binds)]
        sql = re.sub(r'\$(\d+)', lambda m: values[int(m.group(1)) - 1], sql)
        lines.append(" ".join(sql.split()) + ";")
    if not lines:
        raise SystemExit(f"bench/load.sh: no SQL recorded for {name}")
    open(f"{work}/{name}.pgbench", "w").write("\n".join(lines) + "\n")
PY

# Pass 2: the measured server, logging as in production.
start_server "${CANOPY_LOG_LEVEL:-info}" text "$WORK/server.log"

# wrk script: the session header, get-one cycling through ids, and a machine-readable summary.
wrk_lua "$WORK/wrk.lua"

run_wrk() { # run_wrk <path> <out file> [token]
  CANOPY_TOKEN=${3:-$TOKEN} BENCH_PATH="/forest$1" \
    wrk -t "$THREADS" -c "$CONNECTIONS" -d "${DURATION}s" -s "$WORK/wrk.lua" "$BASE" >"$2" 2>&1
}

HZ=$(getconf CLK_TCK)
declare -A RATE
ROWS=()
for name in "${NAMES[@]}"; do
  path=${PATHS[$name]}
  get "$path" "$WORK/$name.json" "$(token_of "$name")"

  before=$(cpu_ticks)
  run_wrk "$path" "$WORK/$name.wrk" "$(token_of "$name")" &
  wrk_pid=$!
  sleep "$(awk -v d="$DURATION" 'BEGIN { print d / 2 }')"
  rss_kb=$(status_kb VmRSS)
  wait "$wrk_pid"
  after=$(cpu_ticks)
  hwm_kb=$(status_kb VmHWM)

  result=$(grep '^RESULT' "$WORK/$name.wrk") || { cat "$WORK/$name.wrk" >&2; exit 1; }
  eval "${result#RESULT }" # requests= duration_us= p50_us= p99_us= errors= non2xx=
  # shellcheck disable=SC2154 # set by the eval above
  RATE[$name]=$(awk -v r="$requests" -v d="$duration_us" 'BEGIN { printf "%.0f", r / (d / 1e6) }')
  ROWS+=("$(awk -v n="$name" -v r="$requests" -v rate="${RATE[$name]}" -v p50="$p50_us" -v p99="$p99_us" \
    -v ticks=$((after - before)) -v hz="$HZ" -v rss="$rss_kb" -v hwm="$hwm_kb" -v err="$errors" -v bad="$non2xx" \
    'BEGIN { printf "%-12s %9d %8d %8.2f %8.2f %9.1f %7.1f %7.1f %6d %6d",
      n, r, rate, p50 / 1000, p99 / 1000, ticks / hz * 1e6 / r, rss / 1024, hwm / 1024, err, bad }')")
done

# The database alone: the same statements from pgbench, prepared, with as many clients as wrk
# has connections. The server is idle meanwhile.
declare -A PGRATE
for name in "${NAMES[@]}"; do
  if [ "$name" = get-one ]; then
    # get-one cycles through ids as wrk does.
    sed -E 's/= 1([^0-9])/= :id\1/' "$WORK/$name.pgbench" >"$WORK/$name.pgbench.tmp"
    { echo '\set id random(1, 5000)'; cat "$WORK/$name.pgbench.tmp"; } >"$WORK/$name.pgbench"
  fi
  PGRATE[$name]=$(pgbench -n -M prepared -c "$CONNECTIONS" -j "$THREADS" -T "$DURATION" \
    -f "$WORK/$name.pgbench" "$DB" 2>&1 | awk '/^tps = / { printf "%.0f", $3 }')
done

# Reload under load: wrk on list-15 while the changed shop plugin (one message of an action, so
# most functions are as before: the function cache holds them) replaces the served one, as a
# deployment does (copy, then rename), and `POST /_canopy/reload` swaps it in.
cp "$CHANGED_PLUGIN" "$WORK/plugins/shop.wasm.new"
run_wrk "${PATHS[list-15]}" "$WORK/reload.wrk" &
wrk_pid=$!
sleep "$(awk -v d="$DURATION" 'BEGIN { print d / 2 }')"
mv "$WORK/plugins/shop.wasm.new" "$WORK/plugins/shop.wasm"
reload_start=$(date +%s%N)
reload_answer=$(curl -s -X POST -H "Authorization: Bearer $ENV_SECRET" "http://127.0.0.1:$PORT/_canopy/reload")
reload_ms=$((($(date +%s%N) - reload_start) / 1000000))
wait "$wrk_pid"
result=$(grep '^RESULT' "$WORK/reload.wrk") || { cat "$WORK/reload.wrk" >&2; exit 1; }
eval "${result#RESULT }"

echo
echo "canopy serve on PostgreSQL $DB: ${CONNECTIONS} connections, ${THREADS} wrk threads, ${DURATION} s per scenario, $(nproc) CPUs"
printf "%-12s %9s %8s %8s %8s %9s %7s %7s %6s %6s %8s %7s\n" \
  scenario requests "req/s" "p50 ms" "p99 ms" "CPU us/rq" "RSS MB" "HWM MB" errors non2xx pgbench "% of pg"
for i in "${!NAMES[@]}"; do
  name=${NAMES[$i]}
  printf '%s %8s %6.0f%%\n' "${ROWS[$i]}" "${PGRATE[$name]}" \
    "$(awk -v a="${RATE[$name]}" -v b="${PGRATE[$name]:-0}" 'BEGIN { print (b > 0 ? 100 * a / b : 0) }')"
done
echo
for size in 15 100; do
  awk -v n="$size" -v a="${RATE[cust-$size]}" -v b="${RATE[cust-$size+fn]}" \
    'BEGIN { printf "computed full_name, page %s: %d -> %d req/s, costs %.1f%% of the throughput\n", n, a, b, 100 * (a - b) / a }'
done
for pair in "list-15 user-15" "cust-15+fn user-cust-15+fn"; do
  read -r admin user <<<"$pair"
  awk -v n="$user" -v a="${RATE[$admin]}" -v b="${RATE[$user]}" -v m="$admin" \
    'BEGIN { printf "non-admin user with scope, %s vs %s: %d -> %d req/s, checks and scope cost %.1f%% of the throughput\n", n, m, a, b, 100 * (a - b) / a }'
done
echo "reload of a changed plugin under load: ${reload_ms} ms wall (server: $reload_answer); wrk during it: $requests requests, $errors errors, $non2xx non-2xx"
optimized=$(grep -h "plugins now serve on Cranelift's code" "$WORK/server.log" | tail -n 1 | grep -o 'compile_ms=[0-9]* swap_ms=[0-9]*' || true)
echo "  Cranelift's code of the changed plugin: ${optimized:-not swapped in (a build without quick compiles, or still compiling)}"
echo "list-15 vs the Node agent's 647 req/s (issue 10's run): $(awk -v a="${RATE[list-15]}" 'BEGIN { printf "%.1fx", a / 647 }')"
echo "targets (issue 23): list-15 and get-one >= 45% of pgbench, list-15 p99 <= 4 ms, computed field <= 5% on page 15 and <= 10% on page 100, RSS (HWM) <= 48 MB, reload <= 300 ms with 0 failures; (issue 11) non-admin checks + scope <= 5%"
fi # ONLY_ACTIVITY

echo "work files (wrk and pgbench scripts, server logs): $WORK"

# --- activity logging (issue 12) -----------------------------------------------------------------
# list-15 with the activity log off and on, alternately, each on a freshly started server.
stop_server
cat >"$WORK/wrk-activity.lua" <<'LUA'
wrk.headers["Authorization"] = "Bearer " .. os.getenv("CANOPY_TOKEN")
wrk.path = os.getenv("BENCH_PATH")
done = function(summary, latency, requests)
  io.write(string.format("RESULT requests=%d duration_us=%d p99_us=%d non2xx=%d\n",
    summary.requests, summary.duration, latency:percentile(99), summary.errors.status))
end
LUA
ACTIVITY_ROUNDS=${ACTIVITY_ROUNDS:-2}
if [ "$ACTIVITY_ROUNDS" = 0 ]; then
  echo
  echo "activity logging: not compared (ACTIVITY_ROUNDS=0)"
  exit 0
fi
declare -A ACT_REQ=([on]=0 [off]=0) ACT_US=([on]=0 [off]=0) ACT_P99=([on]=0 [off]=0)
count_entries() {
  python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT COUNT(*) FROM activity_logs").fetchone()[0])' \
    "$WORK/.canopy/canopy.sqlite"
}
entries_before=$(count_entries)
dropped=0
for round in $(seq "$ACTIVITY_ROUNDS"); do
  for mode in off on; do
    if [ "$mode" = on ]; then SERVE_EXTRA=(--activity-logs=true); else SERVE_EXTRA=(--activity-logs=false); fi
    start_server "${CANOPY_LOG_LEVEL:-info}" text "$WORK/activity-$mode.log"
    get "${PATHS[list-15]}" "$WORK/activity-$mode.json"
    perf_pid=
    if [ -n "${PROFILE:-}" ]; then
      perf record -q -F 499 -p "$PID" -o "$WORK/perf-$mode-$round.data" -- sleep "$DURATION" \
        >/dev/null 2>&1 &
      perf_pid=$!
    fi
    CANOPY_TOKEN=$TOKEN BENCH_PATH="/forest${PATHS[list-15]}" \
      wrk -t "$THREADS" -c "$CONNECTIONS" -d "${DURATION}s" -s "$WORK/wrk-activity.lua" "$BASE" \
      >"$WORK/activity-$mode-$round.wrk" 2>&1
    if [ -n "$perf_pid" ]; then wait "$perf_pid" || true; fi
    stop_server # the shutdown writes the entries still buffered
    dropped=$((dropped + $(grep -c 'activity log buffer full' "$WORK/activity-$mode.log" || true)))
    result=$(grep '^RESULT' "$WORK/activity-$mode-$round.wrk") || { cat "$WORK/activity-$mode-$round.wrk" >&2; exit 1; }
    eval "${result#RESULT }" # requests= duration_us= p99_us= non2xx=
    # shellcheck disable=SC2154 # set by the eval above
    if [ "$non2xx" != 0 ]; then echo "activity $mode: $non2xx non-2xx answers" >&2; exit 1; fi
    ACT_REQ[$mode]=$((ACT_REQ[$mode] + requests))
    ACT_US[$mode]=$((ACT_US[$mode] + duration_us))
    if [ "$p99_us" -gt "${ACT_P99[$mode]}" ]; then ACT_P99[$mode]=$p99_us; fi
  done
done
entries=$(($(count_entries) - entries_before))
echo
echo "activity logging, list-15, $ACTIVITY_ROUNDS alternating pairs of ${DURATION} s:"
awk -v ron="${ACT_REQ[on]}" -v uon="${ACT_US[on]}" -v roff="${ACT_REQ[off]}" -v uoff="${ACT_US[off]}" \
  -v pon="${ACT_P99[on]}" -v poff="${ACT_P99[off]}" 'BEGIN {
    on = ron / (uon / 1e6); off = roff / (uoff / 1e6)
    printf "  off: %.0f req/s (worst p99 %.2f ms)\n  on:  %.0f req/s (worst p99 %.2f ms)\n", off, poff / 1000, on, pon / 1000
    printf "  logging costs %.1f%% of the throughput (target <= 5%%)\n", 100 * (off - on) / off }'
echo "  entries written while on: $entries for ${ACT_REQ[on]} measured requests (plus one check request per run); 'buffer full' warnings: $dropped"

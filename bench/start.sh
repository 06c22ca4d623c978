#!/usr/bin/env bash
# Start time and memory with 10 cached plugins per language, and the hot swap of one changed
# plugin under load (issue 24). Not run by CI.
#
#   bash bench/start.sh
#   CANOPY_BIN=target/release/canopy LANGS="python ts" COUNT=10 bash bench/start.sh
#
# What it does, for each language of $LANGS (default "rust python ts"):
#   1. scaffolds a plugin with `canopy plugin new --lang <lang>` (a computed field `greeting`)
#      and builds it as its README says (cargo, the scaffold's build.sh with componentize-py
#      from $COMPONENTIZE_PY or target/componentize-py, the scaffold's build.sh with the
#      TypeScript SDK's pinned toolchain from sdk/ts/node_modules);
#   2. puts $COUNT copies of it (default 10) in a plugin directory, the kth on table pk of a
#      SQLite database, each with a custom section of its own (so each is compiled and read
#      back from the cache on its own, as different plugins are), and starts `canopy serve`
#      twice on a fresh compile cache: the first start compiles them, the second loads them
#      from the cache. Prints, for each start, the time until the server answers and the host's
#      "plugins loaded" time, and the server's RSS once started;
#   3. with the second server up, rebuilds the first copy with a changed message, puts it in
#      place and asks `POST /_canopy/reload` while a client keeps listing p1 with `greeting`;
#      prints the reload's duration, the requests answered meanwhile and how many failed (goal
#      0), and the greeting served after it (the changed one). The client sends the next request
#      as soon as one is answered (it takes about a core of the machine), or $RATE requests a
#      second when RATE is set (RATE=20: a busy team's console).
# Targets: the second start (10 cached plugins) within 1 s; a hot swap within 2 s, 0 failures.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi

LANGS=${LANGS:-rust python ts}
COUNT=${COUNT:-10}
RATE=${RATE:-0}
WORK=${WORK:-$(mktemp -d -t canopy-start-XXXXXX)}
mkdir -p "$WORK"
AUTH_SECRET=startbench-auth-secret-not-for-production
ENV_SECRET=$(printf '3%.0s' $(seq 64))
export COMPONENTIZE_PY=${COMPONENTIZE_PY:-$PWD/target/componentize-py/bin/componentize-py}
export CANOPY_ADMIN_PASSWORD=startbench-admin-password

if [ -n "${CANOPY_BIN:-}" ]; then
  BIN=$CANOPY_BIN
else
  cargo build --release --locked -p canopy --bin canopy
  BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/canopy
fi
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
ROOT=$PWD
PLUGIN_TARGET=${CARGO_TARGET_DIR:-$ROOT/target}/startbench-plugin
echo "==> work folder: $WORK"

DB=$WORK/data.sqlite
python3 - "$DB" "$COUNT" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for k in range(1, int(sys.argv[2]) + 1):
    db.execute(f"CREATE TABLE p{k} (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    db.executemany(f"INSERT INTO p{k} (name) VALUES (?)", [(f"row {n}",) for n in range(100)])
db.commit()
EOF

build() { # build <lang> <dir>: the scaffold's component, printed path
  local lang=$1 dir=$2 name
  name=$(basename "$dir")
  case "$lang" in
    rust)
      (cd "$dir" && env -u RUSTC_WORKSPACE_WRAPPER -u RUSTFLAGS cargo build --release --quiet \
        --target-dir "$PLUGIN_TARGET") >&2
      echo "$PLUGIN_TARGET/wasm32-wasip2/release/${name//-/_}.wasm"
      ;;
    python)
      (cd "$dir" && ./build.sh) >&2
      echo "$dir/$name.wasm"
      ;;
    ts)
      [ -e "$dir/node_modules" ] || ln -s "$ROOT/sdk/ts/node_modules" "$dir/node_modules"
      (cd "$dir" && ./build.sh) >&2
      echo "$dir/$name.wasm"
      ;;
  esac
}

distinct_copy() { # distinct_copy <wasm> <to> <k>: the component with a custom section `bench-copy`
  # holding k appended, so that each copy has a digest of its own and is compiled, cached and read
  # back on its own, as 10 different plugins are (identical files would be read back once).
  python3 - "$@" <<'EOF'
import sys
source, to, k = sys.argv[1], sys.argv[2], sys.argv[3].encode()
def leb(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)
name = b"bench-copy"
payload = leb(len(name)) + name + k
with open(source, "rb") as f, open(to, "wb") as out:
    out.write(f.read() + b"\x00" + leb(len(payload)) + payload)
EOF
}

PORT=$(free_port)
bench_server_trap
start_server() { # start_server <lang>: serves $WORK/plugins-<lang>; sets STARTED_MS and LOG_MARK
  local t0
  LOG_MARK=$( (wc -l <"$WORK/server-$1.log") 2>/dev/null || echo 0)
  t0=$(date +%s%N)
  CANOPY_PLUGIN_CACHE_DIR="$WORK/cache-$1" "$BIN" serve --database-url "sqlite:$DB" \
    --auth-secret "$AUTH_SECRET" --env-secret "$ENV_SECRET" --plugins "$WORK/plugins-$1" \
    --listen "127.0.0.1:$PORT" --schema-path "$WORK/schema.json" --data-dir "$WORK/.canopy" \
    --log-level "info,canopy::plugins=debug" \
    >>"$WORK/server-$1.log" 2>&1 &
  PID=$!
  wait_serving "http://127.0.0.1:$PORT/forest" "$WORK/server-$1.log" 300
  STARTED_MS=$((($(date +%s%N) - t0) / 1000000))
}
loaded_ms() { # the host's "plugins loaded" time of the last start of <lang>
  # The log is written by a background writer, so the line may land just after the server
  # answers: wait for it (up to 2 s) among the lines written since that start.
  local i
  for i in $(seq 20); do
    tail -n +"$((LOG_MARK + 1))" "$WORK/server-$1.log" | grep -q 'plugins loaded' && break
    sleep 0.1
  done
  tail -n +"$((LOG_MARK + 1))" "$WORK/server-$1.log" | grep 'plugins loaded' | tail -1 \
    | sed 's/.*millis=\([0-9]*\).*/\1/'
}

printf '\n%-8s %-10s %14s %14s %8s\n' language start "serving (ms)" "loaded (ms)" "RSS MB"
declare -A SWAP
for lang in $LANGS; do
  dir=$WORK/start-$lang
  rm -rf "$dir"
  if [ "$lang" = rust ]; then
    (cd "$WORK" && "$BIN" plugin new "start-$lang" --lang rust --sdk "$ROOT/guest-sdk" >/dev/null)
  else
    (cd "$WORK" && "$BIN" plugin new "start-$lang" --lang "$lang" >/dev/null)
  fi
  wasm=$(build "$lang" "$dir")
  mkdir -p "$WORK/plugins-$lang"
  for k in $(seq 1 "$COUNT"); do
    distinct_copy "$wasm" "$WORK/plugins-$lang/greeting$k.wasm" "$k"
    printf '[options]\ncollection = "p%d"\nfield = "name"\n' "$k" >"$WORK/plugins-$lang/greeting$k.toml"
  done
  rm -rf "$WORK/cache-$lang"
  for start in compiling cached; do
    start_server "$lang"
    printf '%-8s %-10s %14d %14s %8d\n' "$lang" "$start" "$STARTED_MS" "$(loaded_ms "$lang")" \
      "$(($(status_kb VmRSS) / 1024))"
    [ "$start" = cached ] || stop_server
  done

  # The hot swap, on the server started from the cache.
  sed -i 's/Hello from/Hi again from/' "$dir"/*.py "$dir"/*.ts "$dir"/src/lib.rs 2>/dev/null || true
  changed=$(build "$lang" "$dir")
  TOKEN=$(admin_token "$BIN" "$WORK/.canopy" "$AUTH_SECRET")
  url="http://127.0.0.1:$PORT/forest/p1?timezone=UTC&fields%5Bp1%5D=id,greeting&page%5Bsize%5D=15"
  python3 - "$url" "$TOKEN" "$RATE" >"$WORK/swap-$lang.out" <<'EOF' &
import sys, time, urllib.request
url, token, rate = sys.argv[1], sys.argv[2], float(sys.argv[3])
until, answered, failed = time.monotonic() + 12, 0, 0
next_at = time.monotonic()
while time.monotonic() < until:
    if rate > 0:  # paced: one request every 1/rate s, whatever the answers' times
        next_at += 1 / rate
        time.sleep(max(0.0, next_at - time.monotonic()))
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": "Bearer " + token}), timeout=30) as r:
            r.read()
            answered += 1
    except Exception:
        failed += 1
print(answered, failed)
EOF
  client=$!
  pace="closed loop"
  [ "$RATE" = 0 ] || pace="$RATE requests/s"
  sleep 1
  cp "$changed" "$WORK/plugins-$lang/greeting1.wasm"
  t0=$(date +%s%N)
  answer=$(curl -s -X POST -H "Authorization: Bearer $ENV_SECRET" "http://127.0.0.1:$PORT/_canopy/reload")
  swap_ms=$((($(date +%s%N) - t0) / 1000000))
  grep -q '"reloaded":true' <<<"$answer" || { echo "reload: $answer" >&2; exit 1; }
  wait "$client"
  read -r answered failed <"$WORK/swap-$lang.out"
  greeting=$(curl -s -g -H "Authorization: Bearer $TOKEN" "$url" | grep -o '"greeting":"[^"]*"' | head -1)
  # Where the swap went, from the host's log: the changed file's Winch compile and the reload.
  quick_ms=$(grep 'plugin compiled' "$WORK/server-$lang.log" | grep 'compiler=Winch' | tail -1 \
    | sed 's/.*millis=\([0-9]*\).*/\1/')
  reload_ms=$(grep 'plugins reloaded' "$WORK/server-$lang.log" | head -1 \
    | sed 's/.*duration_ms=\([0-9]*\).*/\1/')
  SWAP[$lang]="hot swap of one changed plugin (client: $pace): ${swap_ms} ms (reload ${reload_ms:-?} ms, of which the Winch compile ${quick_ms:-?} ms), $answered requests answered meanwhile, $failed failed; now $greeting"
  stop_server
done
echo
for lang in $LANGS; do echo "$lang: ${SWAP[$lang]}"; done

#!/usr/bin/env bash
# Checks the Python and/or TypeScript shop plugins in the real host against the Rust one: builds
# the plugins, seeds identical SQLite shop databases, serves each with `canopy serve` (own ports,
# data dirs and plugin caches), compares the schema files the servers write and the answers of
# compare.py's requests (computed fields, dynamic forms, actions, hooks, segments, search, charts,
# relations, overrides), measures what `full_name` adds to a list page of 100 on every server in
# the same run (field_cost.py), then restarts each non-Rust server once to read its load time from
# the compile cache. Prints the load times the host logs. Stops its servers on exit.
#
#   CANOPY_BIN=/path/to/canopy ./check.sh python|ts...   (default: target/release/canopy)
#
# Needs the language's toolchain (plugin-python/build.sh, plugin-ts/build.sh say which), cargo
# with the wasm32-wasip2 target, python3. WORK=<dir> keeps the work files there (default: a new
# temp dir, kept for inspection). RS_WASM=<file> serves that Rust shop plugin instead of building
# it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
langs=()
declare -A BUILD
for arg in "$@"; do
  case "$arg" in
    python) langs+=(py); BUILD[py]="$here/plugin-python/build.sh" ;;
    ts) langs+=(ts); BUILD[ts]="$here/plugin-ts/build.sh" ;;
    *) echo "usage: $0 python|ts..." >&2; exit 2 ;;
  esac
done
[ "${#langs[@]}" -gt 0 ] || { echo "usage: $0 python|ts..." >&2; exit 2; }
BIN=${CANOPY_BIN:-$root/target/release/canopy}
WORK=${WORK:-$(mktemp -d "/tmp/canopy-check.XXXXXX")}
AUTH=check-auth-secret-not-for-production
ENV=0000000000000000000000000000000000000000000000000000000000000000
[ -x "$BIN" ] || { echo "no canopy binary at $BIN (set CANOPY_BIN)" >&2; exit 1; }

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
declare -A PID PORT
stop() { for l in "${!PID[@]}"; do kill "${PID[$l]}" 2>/dev/null || true; wait "${PID[$l]}" 2>/dev/null || true; done; }
trap stop EXIT

echo "== building the plugins"
for l in "${langs[@]}"; do "${BUILD[$l]}" "$WORK/shop-$l.wasm"; done
if [ -n "${RS_WASM:-}" ]; then
  cp "$RS_WASM" "$WORK/shop-rs.wasm"   # a Rust shop plugin built already (the demo's, the tests')
else
  (cd "$root/examples/shop/plugin" && cargo build --release --target wasm32-wasip2 --target-dir target --quiet)
  cp "$root/examples/shop/plugin/target/wasm32-wasip2/release/shop_plugin.wasm" "$WORK/shop-rs.wasm"
fi

serve() { # serve <lang>: a server of the shop database with that plugin
  local l=$1
  PORT[$l]=$(free_port)
  CANOPY_PLUGIN_CACHE_DIR="$WORK/cache-$l" CANOPY_ADMIN_PASSWORD=check-admin-password \
    "$BIN" serve --database-url "sqlite://$WORK/shop-$l.sqlite" --auth-secret "$AUTH" \
    --env-secret "$ENV" --plugins "$WORK/plugins-$l" --listen "127.0.0.1:${PORT[$l]}" \
    --schema-path "$WORK/schema-$l.json" --data-dir "$WORK/data-$l" \
    --log-level "info,canopy::plugins=debug" >>"$WORK/$l.log" 2>&1 &
  PID[$l]=$!
  for _ in $(seq 300); do
    curl -fs -o /dev/null "http://127.0.0.1:${PORT[$l]}/forest" && return 0
    kill -0 "${PID[$l]}" 2>/dev/null || { echo "the $l server died:" >&2; tail -20 "$WORK/$l.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "the $l server did not answer" >&2; exit 1
}

seed() { # seed <lang>: a fresh copy of the shop database for that server
  rm -f "$WORK/shop-$1.sqlite"
  python3 -c 'import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.executescript(open(sys.argv[2]).read()); db.commit()' \
    "$WORK/shop-$1.sqlite" "$root/examples/shop/seed.sql"
}
for l in "${langs[@]}" rs; do
  rm -rf "$WORK/plugins-$l" "$WORK/cache-$l" "$WORK/data-$l" "$WORK/$l.log"
  mkdir -p "$WORK/plugins-$l"
  cp "$WORK/shop-$l.wasm" "$WORK/plugins-$l/shop.wasm"
  seed "$l"
  serve "$l"
done
token() { "$BIN" token --email admin@canopy.local --data-dir "$WORK/data-$1" --auth-secret "$AUTH" | tail -1; }

status=0
for l in "${langs[@]}"; do
  # compare.py writes: each language is compared with a Rust server on a fresh database.
  if [ "$l" != "${langs[0]}" ]; then
    kill "${PID[rs]}"; wait "${PID[rs]}" 2>/dev/null || true
    seed rs
    serve rs
  fi
  echo "== $l: schema file"
  if diff <(python3 -m json.tool "$WORK/schema-$l.json") <(python3 -m json.tool "$WORK/schema-rs.json") >"$WORK/schema-$l.diff"; then
    echo "identical to Rust's"
  else
    echo "DIFFERENT (see $WORK/schema-$l.diff)"; status=1
  fi
  echo "== $l: answers"
  python3 "$here/compare.py" "http://127.0.0.1:${PORT[$l]}" "$(token "$l")" \
    "http://127.0.0.1:${PORT[rs]}" "$(token rs)" || status=1
done

echo "== full_name on a list page of 100: what it adds (median of ${ROUNDS:-400} rounds, interleaved)"
servers=()
for l in rs "${langs[@]}"; do servers+=("$l=http://127.0.0.1:${PORT[$l]}=$(token "$l")"); done
python3 "$here/field_cost.py" "${ROUNDS:-400}" "${servers[@]}"

echo "== server memory"
for l in "${langs[@]}" rs; do
  awk -v l="$l" '$1 == "VmRSS:" || $1 == "VmHWM:" { printf "  %s %s %d MiB\n", l, $1, $2 / 1024 }' "/proc/${PID[$l]}/status"
done
for l in "${langs[@]}"; do
  echo "== restart of the $l server (compile cache warm)"
  kill "${PID[$l]}"; wait "${PID[$l]}" 2>/dev/null || true; unset "PID[$l]"
  serve "$l"
done

echo "== what the host logged"
for l in "${langs[@]}" rs; do
  echo "$l: $(stat -c %s "$WORK/shop-$l.wasm") bytes"
  grep -h "plugins loaded" "$WORK/$l.log" | sed -e 's/.*millis=\([0-9]*\).*/  plugins loaded in \1 ms/' | \
    awk 'NR == 1 { print $0 " (first start: compiled)" } NR > 1 { print $0 " (from the cache)" }'
  grep -h "call=compute" "$WORK/$l.log" | grep -o 'micros=[0-9]*' | cut -d= -f2 | sort -n | \
    awk '{ v[NR] = $1 } END { if (NR) print "  compute calls: " NR ", median " v[int((NR + 1) / 2)] " us" }'
  grep -h "call=action" "$WORK/$l.log" | grep -o 'micros=[0-9]*' | cut -d= -f2 | sort -n | \
    awk '{ v[NR] = $1 } END { if (NR) print "  action calls: " NR ", median " v[int((NR + 1) / 2)] " us" }'
done
echo "work files: $WORK"
exit "$status"

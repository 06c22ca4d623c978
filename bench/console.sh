#!/usr/bin/env bash
# The console's cost against the API's (issue 22, "Performance"): the server time of a table
# page of 100 rows (`GET /console/c/orders?size=100`: the list, its count, the rights and the
# sidebar, rendered as HTML) against the same list as JSON (`GET /forest/orders?page[size]=100`
# with the same fields) and against that list plus its count (what a JSON client needs for the
# same screen), measured alternately, on `canopy demo` (SQLite shop data), signed in as the admin.
#
#   bash bench/console.sh [path/to/canopy] [rounds]
#
# Prints the median and p90 of curl's time_total per URL (loopback, keep-alive off) and the
# weight of the console's own CSS and JS. The binary defaults to target/release/canopy.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/canopy}
case $bin in /*) ;; *) bin=$PWD/$bin ;; esac
rounds=${2:-50}
dir=$(mktemp -d)
# shellcheck source=bench/lib.sh
source bench/lib.sh
port=$(free_port)
(cd "$dir" && "$bin" demo --listen "127.0.0.1:$port" >"$dir/out.log" 2>"$dir/err.log") &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 300); do grep -q "Press Ctrl-C" "$dir/out.log" 2>/dev/null && break; sleep 1; done
origin="http://127.0.0.1:$port"
token=$(grep -A1 "^Token of" "$dir/out.log" | tail -1)
jar="$dir/cookies"
csrf=$(curl -s -c "$jar" "$origin/console/sign-in" | sed -n 's/.*name="csrf" value="\([^"]*\)".*/\1/p')
curl -s -b "$jar" -c "$jar" -o /dev/null -d "csrf=$csrf&email=admin%40canopy.local&password=canopy-demo-admin&timezone=UTC" "$origin/console/sign-in"
# The same columns on both sides; the console names a customer by `full_name` (the shop plugin's
# computed field), so the list asks for it too.
cols='id,customer_id,status,total,shipping_address,ordered_at,shipped_on,customer'
fields="fields[orders]=$cols&fields[customer]=full_name"
page="$origin/console/c/orders?size=100&col=$cols"
list="$origin/forest/orders?timezone=UTC&page[number]=1&page[size]=100&$fields"
count="$origin/forest/orders/count?timezone=UTC"
time_of() { curl -s -o /dev/null -w '%{time_total}\n' "$@"; }
: >"$dir/page"; : >"$dir/list"; : >"$dir/both"
for _ in $(seq 1 5); do time_of -b "$jar" "$page" >/dev/null; time_of -g -H "Authorization: Bearer $token" "$list" >/dev/null; done
for _ in $(seq 1 "$rounds"); do
  time_of -b "$jar" "$page" >>"$dir/page"
  time_of -g -H "Authorization: Bearer $token" "$list" >>"$dir/list"
  a=$(time_of -g -H "Authorization: Bearer $token" "$list"); b=$(time_of -H "Authorization: Bearer $token" "$count")
  echo "$a + $b" | bc -l >>"$dir/both"
done
status=$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" "$page")
[ "$status" = 200 ] || { echo "the console page answered $status" >&2; exit 1; }
rows=$(curl -s -b "$jar" "$page" | grep -c '<td class="actions">' || true)
stats() { sort -n "$1" | awk '{a[NR]=$1} END {printf "median %.1f ms  p90 %.1f ms\n", a[int((NR+1)/2)]*1000, a[int(NR*0.9)]*1000}'; }
echo "console table page, $rows rows:  $(stats "$dir/page")"
echo "GET /forest list (100 rows):     $(stats "$dir/list")"
echo "GET /forest list + count:        $(stats "$dir/both")"
css=$(wc -c <host/src/console/assets/console.css); js=$(wc -c <host/src/console/assets/console.js)
echo "console CSS + JS: $css + $js bytes = $(( (css + js) / 1024 )) KB uncompressed"

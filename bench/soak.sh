#!/usr/bin/env bash
# Soak test of several `canopy serve` instances on one PostgreSQL store (issue 25). Not run by CI.
#
#   bash bench/soak.sh                     # 10 minutes, 3 instances
#   DURATION=60 INSTANCES=2 bash bench/soak.sh
#   KINDS="read mcp" DURATION=180 INSTANCES=1 bash bench/soak.sh   # some kinds of request only
#
# What it does:
#   1. builds the release binary (unless CANOPY_BIN names one);
#   2. recreates two PostgreSQL databases on 127.0.0.1:5432 (user postgres, trust): the shop's
#      data ($DATA_DB, default canopy_soak_data, examples/shop/seed.postgres.sql) and Canopy's
#      store ($STATE_DB, default canopy_soak_state);
#   3. starts $INSTANCES instances (ports 3361…) on that store, with a no-code update-record
#      action on orders and a workflow whose webhook is enabled;
#   4. runs a bounded mixed load for $DURATION seconds (default 600) from $CLIENTS threads
#      (default 6), spread round-robin over the instances, each kind at its own pace:
#        read     GET /forest/orders?page[size]=15 and GET /forest/customers/{id}
#        write    PUT /forest/products/{id} (a new stock level)
#        action   POST /forest/_actions/orders/0/mark-as-reviewed (the no-code action)
#        webhook  POST {the workflow's webhook URL} {"record_id": …} (202, or 409 when a run of
#                 that record is still ongoing: both are answers, not errors)
#        mcp      POST /mcp tools/list without a token (401 with its OAuth challenge: the MCP
#                 endpoint's own work, without a client that signs in)
#   5. prints the error count (an unexpected status or a failed connection; goal 0), p50/p99
#      per kind, and each instance's RSS at start, after the first minute of load, at its highest
#      (sampled every 30 s) and at the end (goal: no growth beyond 10% after the first minute);
#   6. stops the instances; the databases stay for inspection.
#
# The machine's cores are shared by the instances, PostgreSQL and the load: this is a test of
# stability (errors, memory), not of throughput (bench/load.sh measures that).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-600}
INSTANCES=${INSTANCES:-3}
CLIENTS=${CLIENTS:-6}
DATA_DB=${DATA_DB:-canopy_soak_data}
STATE_DB=${STATE_DB:-canopy_soak_state}
WORK=${WORK:-$(mktemp -d -t canopy-soak-XXXXXX)}
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
AUTH_SECRET=soak-auth-secret-0123456789abcdef
ENV_SECRET=$(printf '7%.0s' $(seq 64))

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
description = "Soak: read an order"
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
project = "soak"
workflowsDir = "$WORK/workflows"
workflowWebhookRateLimitPerMinute = 1000000
apiRateLimitPerMinute = 1000000
apiRateLimitPerMinutePerIp = 1000000

[[datasources]]
url = "postgres://$PGUSER@$PGHOST:$PGPORT/$DATA_DB"

[experimental]
updateRecordCustomActions = true

[mcp]
enabled = true

[[noCodeActions]]
collection = "orders"
name = "Mark as reviewed"
type = "update-record"
fields = { status = "paid" }
EOF

pids=()
stop() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop EXIT

ports=()
for i in $(seq 1 "$INSTANCES"); do
  port=$((3360 + i))
  ports+=("$port")
  "$CANOPY_BIN" serve --config "$WORK/canopy.toml" --listen "127.0.0.1:$port" \
    --schema-path "$WORK/schema-$i.json" --log-level warn >"$WORK/instance-$i.out" \
    2>"$WORK/instance-$i.log" &
  pids+=("$!")
  # One at a time: the first migrates the store and creates the first admin.
  for _ in $(seq 1 120); do
    if curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; then break; fi
    sleep 0.5
  done
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || {
    echo "instance $i did not start:"
    cat "$WORK/instance-$i.log"
    exit 1
  }
done
echo "==> $INSTANCES instances on ports ${ports[*]}"

cli() { "$CANOPY_BIN" "$@" --config "$WORK/canopy.toml"; }
SESSION=$(cli token --email admin@canopy.local)
cli workflows webhook enable review --public-url http://soak.test >/dev/null
WEBHOOK=$(cli workflows webhook url review --public-url http://soak.test | tail -n 1)
WEBHOOK_PATH=${WEBHOOK#http://soak.test}
API_TOKEN=$(cli tokens create --email admin@canopy.local --name soak --scope workflows:trigger |
  tail -n 1)

rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
rss_start=()
for pid in "${pids[@]}"; do rss_start+=("$(rss "$pid")"); done
# Every instance's RSS every 30 s of the load, one line per sample: a process that has just
# started has not yet filled its pools, caches and worker stacks, so growth is judged from the
# first minute's sample, not from the start.
(
  while sleep 30; do
    line=""
    for pid in "${pids[@]}"; do line+="$(rss "$pid") "; done
    echo "$line"
  done
) >"$WORK/rss.samples" 2>/dev/null &
sampler=$!

echo "==> mixed load for ${DURATION}s from $CLIENTS clients"
PORTS="${ports[*]}" SESSION="$SESSION" WEBHOOK_PATH="$WEBHOOK_PATH" API_TOKEN="$API_TOKEN" \
  DURATION="$DURATION" CLIENTS="$CLIENTS" KINDS="${KINDS:-}" python3 - <<'EOF'
import http.client, json, os, random, threading, time

ports = os.environ["PORTS"].split()
session = "Bearer " + os.environ["SESSION"]
token = "Bearer " + os.environ["API_TOKEN"]
webhook = os.environ["WEBHOOK_PATH"]
until = time.monotonic() + int(os.environ["DURATION"])
action = "/forest/_actions/orders/0/mark-as-reviewed?timezone=UTC"

def selection(ids):
    return json.dumps({"data": {"attributes": {"collection_name": "orders",
        "ids": [str(i) for i in ids], "values": {}}}})

# kind -> (method, path, body, headers, accepted statuses)
def request(kind, rng):
    if kind == "read":
        if rng.random() < 0.5:
            return ("GET", "/forest/orders?timezone=UTC&page[size]=15&sort=-id"
                    "&fields[orders]=id,status,total", None, {"authorization": session}, {200})
        return ("GET", f"/forest/customers/{rng.randint(1, 500)}?timezone=UTC", None,
                {"authorization": session}, {200})
    if kind == "write":
        product = rng.randint(1, 200)
        return ("PUT", f"/forest/products/{product}?timezone=UTC",
                json.dumps({"data": {"type": "products", "id": str(product),
                                     "attributes": {"stock": rng.randint(0, 100)}}}),
                {"authorization": session, "content-type": "application/json"}, {200})
    if kind == "action":
        return ("POST", action, selection([rng.randint(1, 5000)]),
                {"authorization": session, "content-type": "application/json"}, {200})
    if kind == "webhook":
        return ("POST", webhook, json.dumps({"record_id": str(rng.randint(1, 5000))}),
                {"authorization": token, "content-type": "application/json"}, {202, 409})
    return ("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            {"content-type": "application/json", "accept": "application/json, text/event-stream"},
            {401})

weights = [("read", 6), ("write", 2), ("action", 1), ("webhook", 1), ("mcp", 1)]
if os.environ.get("KINDS"):  # a subset, to see which kind a memory growth comes from
    weights = [(k, w) for k, w in weights if k in os.environ["KINDS"].split()]
kinds = [k for k, w in weights for _ in range(w)]
latencies = {k: [] for k, _ in weights}
errors = {k: 0 for k, _ in weights}
samples = []
retried = [0]
lock = threading.Lock()

def client(n):
    rng = random.Random(n)
    connections = {}
    i = n
    while time.monotonic() < until:
        kind = rng.choice(kinds)
        port = ports[i % len(ports)]
        i += 1
        method, path, body, headers, accepted = request(kind, rng)
        started = time.monotonic()
        ok = False
        # A kept-alive connection the server closed meanwhile (its idle timeout) fails at once:
        # like any HTTP client, send again once on a new connection. A failure on a new
        # connection is an error.
        for attempt in range(2):
            reused = port in connections
            try:
                conn = connections.get(port) or http.client.HTTPConnection(
                    "127.0.0.1", port, timeout=30)
                connections[port] = conn
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                text = response.read()
                ok = response.status in accepted
                if not ok and len(samples) < 10:
                    samples.append(f"{kind} {method} {path} -> {response.status} {text[:200]!r}")
                break
            except (ConnectionError, http.client.RemoteDisconnected, BrokenPipeError) as error:
                connections.pop(port, None)
                if reused and attempt == 0:
                    with lock:
                        retried[0] += 1
                    continue
                if len(samples) < 10:
                    samples.append(f"{kind} {method} {path} -> {error!r}")
                break
            except Exception as error:
                connections.pop(port, None)
                if len(samples) < 10:
                    samples.append(f"{kind} {method} {path} -> {error!r}")
                break
        elapsed = time.monotonic() - started
        with lock:
            latencies[kind].append(elapsed)
            if not ok:
                errors[kind] += 1

threads = [threading.Thread(target=client, args=(n,)) for n in range(int(os.environ["CLIENTS"]))]
for t in threads: t.start()
for t in threads: t.join()

def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] * 1000 if values else 0.0

print(f"{'kind':<8} {'requests':>9} {'errors':>7} {'p50 ms':>8} {'p99 ms':>8}")
for kind, _ in weights:
    v = latencies[kind]
    print(f"{kind:<8} {len(v):>9} {errors[kind]:>7} {pct(v, .5):>8.1f} {pct(v, .99):>8.1f}")
total = sum(errors.values())
print(f"errors: {total} of {sum(len(v) for v in latencies.values())} requests "
      f"({retried[0]} sent again on a new connection after a kept-alive one was closed)")
for line in samples:
    print("  " + line)
EOF

kill "$sampler" 2>/dev/null || true
echo "==> memory (VmRSS, kB): at start, after the first minute of load, highest sample, at the end"
for i in "${!pids[@]}"; do
  end=$(rss "${pids[$i]}")
  start=${rss_start[$i]}
  column=$(awk -v c=$((i + 1)) '{print $c}' "$WORK/rss.samples")
  warm=$(sed -n 2p <<<"$column")
  warm=${warm:-$start}
  peak=$(sort -n <<<"$column"$'\n'"$end" | tail -1)
  echo "instance $((i + 1)): $start, $warm, $peak, $end: $(( (end - warm) * 100 / warm ))% after the first minute ($(( (end - start) * 100 / start ))% from the start)"
done

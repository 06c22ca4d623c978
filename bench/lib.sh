# shellcheck shell=bash
# What the bench scripts share (sourced by load.sh, compare.sh, export.sh and scale.sh): a free
# port, the served process's lifetime, CPU time and status fields, a median, the admin's token
# once a store exists, and a wrk script.
# The server's pid is $PID; `stop_server` is set as the EXIT trap by `bench_server_trap`.

free_port() { # a free TCP port on loopback
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

PID=
stop_server() { if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; PID=; fi; }
bench_server_trap() { trap stop_server EXIT; }

wait_serving() { # wait_serving <url> <log file> <seconds>: until <url> answers, or $PID dies
  local url=$1 log=$2 tenths=$(($3 * 10))
  for _ in $(seq "$tenths"); do
    curl -fs -o /dev/null "$url" && return 0
    kill -0 "$PID" 2>/dev/null || { echo "the server died:" >&2; tail -20 "$log" >&2; exit 1; }
    sleep 0.1
  done
  echo "the server did not answer within $3 s" >&2
  exit 1
}

cpu_ticks() { # utime + stime of $PID, in clock ticks (fields 14 and 15; comm may hold spaces)
  local stat
  stat=$(<"/proc/$PID/stat")
  stat=${stat##*) }
  awk '{ print $12 + $13 }' <<<"$stat"
}

status_kb() { # status_kb <field>: a field of /proc/$PID/status in kB (VmRSS, VmHWM, ...)
  awk -v k="$1:" '$1 == k { print $2 }' "/proc/$PID/status"
}

median() { # the median of the numbers on stdin, one per line
  sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

admin_token() { # admin_token <canopy binary> <data dir> <auth secret>: a session token of the
  # store's bootstrapped admin (`canopy token` reads the user from the store, so a first
  # `canopy serve` must have created it)
  "$1" token --email "${CANOPY_ADMIN_EMAIL:-admin@canopy.local}" --data-dir "$2" --auth-secret "$3"
}

wrk_lua() { # wrk_lua <file>: a wrk script that sends $CANOPY_TOKEN, requests $BENCH_PATH (a path
  # with /ID? cycles through the ids 1..5000) and prints one machine-readable line:
  # RESULT requests= duration_us= p50_us= p99_us= errors= non2xx=
  cat >"$1" <<'LUA'
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
}

"""What the shop plugin's `full_name` computed field adds to a list page of 100 customers, on
several servers in the same run: for each, the median time of the page with `full_name` and
without it, requests interleaved across servers and variants so that the machine's load falls
on all of them alike.

    python3 field_cost.py ROUNDS NAME=BASE=TOKEN ...

The first server is the reference: the others' overhead is also given as a multiple of its."""

import statistics
import sys
import time
import urllib.request

ROUNDS = int(sys.argv[1])
SERVERS = [arg.split("=", 2) for arg in sys.argv[2:]]
FIELDS = "id,first_name,last_name"
PAGE = "/forest/customers?timezone=UTC&page[size]=100&page[number]=1&sort=id&fields[customers]="


def timed(base, token, fields):
    req = urllib.request.Request(base + PAGE + fields, headers={"Authorization": f"Bearer {token}"})
    start = time.perf_counter()
    with urllib.request.urlopen(req) as r:
        r.read()
        assert r.status == 200
    return (time.perf_counter() - start) * 1000


times = {(name, with_field): [] for name, _, _ in SERVERS for with_field in (False, True)}
for name, base, token in SERVERS:  # warm every instance pool and cache first
    for _ in range(20):
        timed(base, token, FIELDS + ",full_name")
        timed(base, token, FIELDS)
for _ in range(ROUNDS):
    for name, base, token in SERVERS:
        for with_field in (False, True):
            times[(name, with_field)].append(timed(base, token, FIELDS + ",full_name" if with_field else FIELDS))

reference = None
for name, _, _ in SERVERS:
    without = statistics.median(times[(name, False)])
    with_ = statistics.median(times[(name, True)])
    overhead = with_ - without
    if reference is None:
        reference = overhead
    ratio = f", {overhead / reference:.1f}x the {SERVERS[0][0]} overhead" if reference > 0 else ""
    print(f"  {name}: {without:.2f} ms -> {with_:.2f} ms, full_name adds {overhead:.2f} ms{ratio}")

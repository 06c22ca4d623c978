"""Sends the same requests to two servers of the shop demo, one with the Python or TypeScript
plugin and one with the Rust plugin, and says for each whether the answers (status and body) are
the same.

    python3 compare.py BASE TOKEN RS_BASE RS_TOKEN [name filter ...]

Bases are `http://127.0.0.1:PORT`. Both databases must start from the same seed: the requests
write (a VIP mark, a refund, a shipment, a created customer, a deleted product) in the same order
on both. Exit status 1 when any answer differs. `check.sh` runs it."""

import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

BASE = {"other": sys.argv[1], "rs": sys.argv[3]}
TOK = {"other": sys.argv[2], "rs": sys.argv[4]}


def call(lang, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE[lang] + path, data=data, method=method, headers={
        "Authorization": f"Bearer {TOK[lang]}", "Content-Type": "application/json"})
    t = time.perf_counter()
    try:
        with urllib.request.urlopen(req) as r:
            status, out = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, out = e.code, e.read()
    return status, out, (time.perf_counter() - t) * 1000


def q(**kw):
    return "?" + urllib.parse.urlencode({"timezone": "UTC", **kw})

def action(ids, values=None, fields=None, changed=None):
    a = {"collection_name": "x", "ids": ids, "values": values or {}}
    if fields is not None:
        a["fields"] = fields
    if changed is not None:
        a["changed_field"] = changed
    return {"data": {"attributes": a}}

CASES = [
  ("computed full_name", "GET", "/forest/customers" + q(**{"fields[customers]": "id,first_name,last_name,full_name", "page[size]": 5, "sort": "id"})),
  ("computed across relation", "GET", "/forest/orders" + q(**{"fields[orders]": "id,status,customer_name,customer_email", "page[size]": 5, "sort": "id"})),
  ("emulated sort customer_name", "GET", "/forest/orders" + q(**{"fields[orders]": "id,customer_name", "page[size]": 4, "sort": "-customer_name"})),
  ("search customers", "GET", "/forest/customers" + q(**{"fields[customers]": "id,email", "search": "Cleo", "page[size]": 3, "sort": "id"})),
  ("search orders by id", "GET", "/forest/orders" + q(**{"fields[orders]": "id,status", "search": "42"})),
  ("search orders by status", "GET", "/forest/orders" + q(**{"fields[orders]": "id,status", "search": "Paid", "page[size]": 3, "sort": "id"})),
  ("search orders, no match", "GET", "/forest/orders" + q(**{"fields[orders]": "id", "search": "nothing"})),
  ("static segment", "GET", "/forest/customers/count" + q(segment="VIP customers")),
  ("dynamic segment", "GET", "/forest/orders/count" + q(segment="Above average")),
  ("price_band filter (operator replaced)", "GET", "/forest/products/count" + q(filters=json.dumps({"field": "price_band", "operator": "equal", "value": "premium"}))),
  ("price_band values, sorted through price", "GET", "/forest/products" + q(**{"fields[products]": "id,price,price_band", "sort": "-price_band", "page[size]": 3})),
  ("relation purchases", "GET", "/forest/customers/1/relationships/purchases" + q(**{"fields[purchases]": "id,total", "page[size]": 3, "sort": "id"})),
  ("relation labels", "GET", "/forest/products/1/relationships/labels" + q(**{"page[size]": 3})),
  ("count disabled", "GET", "/forest/order_items/count" + q()),
  ("chart lifetime_value", "GET", "/forest/_charts/customers/lifetime_value" + q(record_id=1)),
  ("chart items_ordered", "GET", "/forest/_charts/orders/items_ordered" + q(record_id=1)),
  ("chart orders_by_status", "GET", "/forest/_charts/orders_by_status" + q()),
  ("form load (dynamic)", "POST", "/forest/_actions/customers/0/offer-a-coupon/hooks/load" + q(), action(["1"])),
  ("form change Amount=100 shows Reason", "POST", "/forest/_actions/customers/0/offer-a-coupon/hooks/change" + q(),
     action(["1"], fields=[{"field": "Amount", "value": 100}, {"field": "Kind", "value": "Percent"}], changed="Amount")),
  ("two-page form load", "POST", "/forest/_actions/orders/3/ship-the-order/hooks/load" + q(), action(["1"])),
  ("two-page form change (no notify)", "POST", "/forest/_actions/orders/3/ship-the-order/hooks/change" + q(),
     action(["1"], fields=[{"field": "Notify the customer", "value": False}], changed="Notify the customer")),
  ("execute Offer a coupon", "POST", "/forest/_actions/customers/0/offer-a-coupon" + q(), action(["2"], values={"Amount": 12.5, "Kind": "Percent"})),
  ("execute Mark as VIP", "POST", "/forest/_actions/customers/1/mark-as-vip" + q(), action(["3", "4"])),
  ("execute Export orders (file)", "POST", "/forest/_actions/orders/0/export-orders" + q(), action([])),
  ("execute Refund (a paid order)", "POST", "/forest/_actions/orders/1/refund" + q(), action(["1"], values={"Reason": "broken"})),
  ("execute Refund on a cancelled order (error result)", "POST", "/forest/_actions/orders/1/refund" + q(), action(["4"])),
  ("chart items_ordered on a cancelled order (error)", "GET", "/forest/_charts/orders/items_ordered" + q(record_id=4)),
  ("execute Attach a document", "POST", "/forest/_actions/orders/2/attach-a-document" + q(), action(["5"], values={"Document": "data:text/plain;name=note.txt;base64,aGVsbG8="})),
  ("execute Ship the order", "POST", "/forest/_actions/orders/3/ship-the-order" + q(), action(["6"], values={"Carrier": "Post", "Tracking number": "T1", "Notify the customer": True, "Message": "soon"})),
  ("execute Notify the warehouse", "POST", "/forest/_actions/orders/4/notify-the-warehouse" + q(), action(["7"], values={"Warehouse URL": "http://127.0.0.1:8900/orders"})),
  ("hook refuses bad email", "POST", "/forest/customers" + q(), {"data": {"type": "customers", "attributes": {"first_name": "X", "last_name": "Y", "email": "no-at-sign", "created_at": "2024-01-01T00:00:00Z"}}}),
  ("hook lower-cases email", "POST", "/forest/customers" + q(), {"data": {"type": "customers", "attributes": {"first_name": "X", "last_name": "Y", "email": "New.Person@Example.COM", "created_at": "2024-01-01T00:00:00Z"}}}),
  ("create a customer with non-ASCII names", "POST", "/forest/customers" + q(), {"data": {"type": "customers", "attributes": {"first_name": "Zoë 日本", "last_name": "Ångström 🎉", "email": "Zoe@Example.com", "created_at": "2024-01-01T00:00:00Z"}}}),
  ("full_name packs non-ASCII text (byte offsets)", "GET", "/forest/customers" + q(**{"fields[customers]": "id,full_name", "page[size]": 3, "sort": "-id"})),
  ("price validation", "PUT", "/forest/products/1" + q(), {"data": {"type": "products", "id": "1", "attributes": {"price": -1}}}),
  ("override delete keeps the product", "DELETE", "/forest/products/2" + q()),
  ("...and empties its stock", "GET", "/forest/products/2" + q()),
]

def norm(b):
    try:
        return json.loads(b)
    except ValueError:
        return b
only = sys.argv[5:]
diffs = 0
for case in CASES:
    name, method, path = case[:3]
    body = case[3] if len(case) > 3 else None
    if only and not any(o in name for o in only):
        continue
    rs = call("rs", method, path, body)
    other = call("other", method, path, body)
    same = rs[0] == other[0] and norm(rs[1]) == norm(other[1])
    diffs += not same
    print(f"{'SAME' if same else 'DIFF'} {other[0]} {other[2]:7.1f} ms  rs {rs[2]:6.1f} ms  {name}")
    print(f"      {other[1][:160]!r}")
    if not same:
        print(f"   rs {rs[0]} {rs[1][:400]!r}")
print(f"{diffs} of the answers differ")
sys.exit(1 if diffs else 0)

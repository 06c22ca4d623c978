#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (fuzz/corpus/<target>/seed-*) from the inputs of
the host crate's own tests, in each target's input layout (see the target's header comment).

Run from anywhere: `python3 fuzz/seeds.py`. It rewrites only the `seed-*` files; what libFuzzer
adds to a corpus directory and the kept reproducers (`crash-*`, named for what they found) stay.
"""

import base64
import hashlib
import hmac
import json
import pathlib
import struct
from urllib.parse import urlencode

CORPUS = pathlib.Path(__file__).resolve().parent / "corpus"


def enc(pairs):
    """A query string as the tests encode one (`form_urlencoded::Serializer`)."""
    return urlencode(pairs)


def tree(value):
    return json.dumps(value, separators=(",", ":"))


# agent/query_string.rs tests (the same collections and fields as canopy::fuzzing::schema).
QUERY_STRING = [
    ("books", "timezone=Europe%2FParis"),
    ("books", "timezone=Mars/Olympus"),
    ("books", "timezone=UTC&timezone=UTC"),
    ("books", "?a=1&b=x+y%20z&fields%5Bbooks%5D=id&a=2&c=%ZZ&d"),
    ("books", "delete=false&header=Id,Title&filename=My+books"),
    ("books", "segment=nope&searchExtended=1&sort=title&filters=%7B"),
    ("books", enc([("fields[books]", "title,author"), ("fields[author]", "name")])),
    ("books", enc([("fields[books]", "author,id"), ("fields[author]", "name,company_id")])),
    ("books", enc([("fields[books]", "reviews"), ("fields[reviews]", "id")])),
    ("books", enc([("fields[books]", "id, title")])),
    ("books", enc([("fields[books]", "nope")]), " title , author:company:name "),
    ("books", "", "author:manager:manager:manager:company:name"),
    ("books", enc([("filters", tree({"aggregator": "and", "conditions": [
        {"field": "title", "operator": "i_contains", "value": "dune"},
        {"field": "id", "operator": "in", "value": "1, 2"}]}))])),
    ("books", enc([("filters", tree({"field": "author:name", "operator": "equal", "value": "Ann"}))])),
    ("books", enc([("filters", tree({"field": "title", "operator": "teleports", "value": 1}))])),
    ("books", enc([("filters", tree({"field": "published", "operator": "previous_x_days", "value": 3}))])),
    ("books", enc([("filters", tree({"field": "status", "operator": "in", "value": ["draft", "x"]}))])),
    ("books", enc([("filters", tree({"field": "moods", "operator": "includes_all", "value": ["happy"]}))])),
    ("books", enc([("filters", tree({"aggregator": "or", "conditions": [
        {"field": "created_at", "operator": "before_x_hours_ago", "value": 2},
        {"field": "in_stock", "operator": "equal", "value": True},
        {"field": "author:manager:name", "operator": "present"}]}))])),
    ("books", "filters=null"),
    ("books", "search=dune+2&searchExtended=true&segment=Best+sellers"),
    ("books", "segmentQuery=select+id+from+books&connectionName=main"),
    ("books", "page[number]=2.5&page[size]=3abc&sort=-title,author.name"),
    ("books", "page%5Bsize%5D=1001&sort=id"),
    ("order_items", "search=x&sort=order_id,-sku"),
    ("persons", enc([("fields[persons]", "name,manager"), ("fields[manager]", "name")])),
    ("logs", "sort=message"),
    ("files", enc([("filters", tree({"field": "hash", "operator": "equal", "value": "beef"}))])),
]

# agent/body.rs and the selection tests of agent/query_string.rs.
BODY = [
    ("books", "", "", {"data": {"type": "books", "attributes": {
        "title": "Dune", "price": "12", "in_stock": True, "status": "draft",
        "published": "1965-08-01", "metadata": {"a": [1]}, "moods": ["happy"]}}}),
    ("books", "", "", {"data": {"type": "books", "id": "7", "attributes": {"title": "x"},
        "relationships": {"author": {"data": {"type": "persons",
            "id": "9b6a1f3c-6a43-4d2c-9d3e-0f8f1e2b3c4d"}}}}}),
    ("books", "", "", {"data": {"attributes": {"author": ["9b6a1f3c-6a43-4d2c-9d3e-0f8f1e2b3c4d"],
        "cover": "data:image/png;base64,iVBORw0KGgo=", "dimensions": {"width": 3, "unit": "cm"}}}}),
    ("books", "", "", {"data": {"attributes": {"price": "7.125"}}}),
    ("books", "", "", {"data": {"attributes": {"created_at": "2024-01-02T03:04:05Z"}}}),
    ("books", "", "", {"data": {"attributes": {"location": [1.5, 2], "scores": [1, "2"]}}}),
    ("books", "", "moods/0", {"data": {"attributes": {"value": "sad"}}}),
    ("books", "", "moods/-1", {"data": {"attributes": {}}}),
    ("order_items", "", "", {"data": {"id": "1|a", "attributes": {"quantity": 2, "sku": "a"}}}),
    ("persons", "", "", {"data": [{"type": "persons", "id": "9b6a1f3c-6a43-4d2c-9d3e-0f8f1e2b3c4d"}]}),
    ("persons", "", "", {"data": None}),
    ("files", "", "", {"data": {"id": "beef", "attributes": {"name": "a.txt"}}}),
    ("books", "", "", {"data": {"attributes": {"ids": ["1", "2"], "all_records": False}}}),
    ("books", "", "", {"data": [{"type": "books", "id": "7"}]}),
    ("books", "", "", {"data": {"attributes": {"all_records": True, "all_records_ids_excluded": None}}}),
    ("books", "segment=nope&searchExtended=1&sort=title&filters=%7B", "",
        {"data": {"attributes": {"all_records": True, "all_records_ids_excluded": ["4"],
            "all_records_subset_query": {
                "filters": {"field": "title", "operator": "equal", "value": "Dune"},
                "search": "x", "searchExtended": 0, "segment": "Recent",
                "page[size]": 0, "sort": None}}}}),
    ("books", "", "", {"data": {"attributes": {"ids": ["1", "2"], "all_records_subset_query": {
        "filters": "{\"field\":\"id\",\"operator\":\"equal\",\"value\":1}"}}}}),
    ("order_items", "", "", {"data": {"attributes": {"ids": ["1|a", "2|b"], "all_records": True,
        "all_records_ids_excluded": ["1|a"]}}}),
]

# workflows/webhook.rs tests: the derived key of the fuzz target's auth secret, and a
# configured ring (`workflowWebhookKeys`).
TRIGGER = "0b6f2f0e-4d0a-4c3e-9d7e-2f3b5a6c7d8e"
DOMAIN = b"canopy:workflow-webhook:v1"
SECRET = b"an auth secret of the fuzz target, 32+ bytes"
KEY = bytes(range(32))
KEYS = "k1:" + base64.b64encode(KEY).decode() + ",old:" + base64.b64encode(KEY[::-1]).decode()


def signed(project, environment, version, kid, key):
    message = f"canopy:workflow-webhook:v1|{len(project)}:{project}|{len(environment)}:{environment}|{TRIGGER}|{version}|{kid}"
    mac = hmac.new(key, message.encode(), hashlib.sha256).digest()[:16]
    return f"{TRIGGER}.{version}.{kid}." + base64.urlsafe_b64encode(mac).decode().rstrip("=")


DERIVED = hmac.new(SECRET, DOMAIN, hashlib.sha256).digest()
GOOD = signed("acme", "production", 3, "s", DERIVED)
WEBHOOK = [
    (GOOD, "acme", "production", ""),
    (GOOD, "acme", "staging", ""),
    (GOOD.replace(".3.", ".4.", 1), "acme", "production", ""),
    (GOOD.replace("0b6f", "1b6f", 1), "acme", "production", ""),
    (signed("p", "e", 1, "k1", KEY), "p", "e", KEYS),
    (signed("p", "e", 12, "old", KEY[::-1]), "p", "e", KEYS),
    (GOOD + ".x", "acme", "production", ""),
    (GOOD.replace(".3.", ".0.", 1), "acme", "production", ""),
    (GOOD.replace(".3.", ".+1.", 1), "acme", "production", ""),
    (GOOD.replace(TRIGGER, "not-a-uuid", 1), "acme", "production", ""),
    (GOOD.replace(".s.", ".s!.", 1), "acme", "production", ""),
    ("aaaa.1.s.MAC", "", "", "k1:short"),
    ("", "", "", ""),
]

# mcp/oauth.rs tests: authorization requests, registrations and token bodies.
AUTHORIZE = enc([
    ("response_type", "code"), ("client_id", "c1"),
    ("redirect_uri", "http://127.0.0.1:4000/cb"),
    ("code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"),
    ("code_challenge_method", "S256"), ("state", "xyz"),
    ("resource", "https://canopy.example/forest/mcp/"), ("scope", "mcp:read mcp:write"),
    ("code_verifier", "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
])
OAUTH = [
    (AUTHORIZE, "claude.ai", {"redirect_uris": ["http://127.0.0.1:3000/cb"], "client_name": "Test"}),
    (AUTHORIZE.replace("127.0.0.1%3A4000", "evil.example"), "", {}),
    (AUTHORIZE.replace("S256", "plain"), "", {"redirect_uris": ["http://example.com/cb"]}),
    (enc([("response_type", "token"), ("redirect_uri", "https://claude.ai/api/mcp/auth_callback")]),
        "claude.ai,example.com", {"redirect_uris": ["https://x/cb#f"]}),
    (enc([("scope", "mcp:admin+mcp:nope"), ("resource", "http://other:1/mcp")]), "claude.ai",
        {"redirect_uris": ["https://x/cb"], "token_endpoint_auth_method": "client_secret_basic"}),
    ("", "claude.ai", {"redirect_uris": ["https://x/cb"], "grant_types": ["password"]}),
    ("", "", {"redirect_uris": ["com.example.app:/callback", "http://[::1]:8080/cb"],
        "scope": "mcp:read mcp:action", "response_types": ["code"], "logo_uri": "https://x/l.png"}),
    ("", "", "grant_type=authorization_code&code=abc&client_id=c1&code_verifier=v&redirect_uri=http%3A%2F%2F127.0.0.1%3A3000%2Fcb"),
    ("", "", {"grant_type": "refresh_token", "refresh_token": "r", "client_id": "c1", "scope": None}),
]

# mcp/filter.rs tests, on the collections of canopy::fuzzing::schema.
MCP_FILTER = [
    ("books", {"aggregator": "And", "conditions": [
        {"field": "status", "operator": "Equal", "value": "draft"},
        {"field": "author:name", "operator": "IContains", "value": "ada"}]}),
    ("books", {"aggregator": "And", "conditions": [{"field": "x", "operator": "Sorta"}]}),
    ("books", []),
    ("books", {"aggregator": "Or", "conditions": [{"aggregator": "Or", "conditions": [
        {"aggregator": "Or", "conditions": [{"aggregator": "Or", "conditions": []}]}]}]}),
    ("books", {"field": "published", "operator": "PreviousXDaysToDate", "value": 7}),
    ("books", {"field": "created_at", "operator": "today"}),
    ("persons", {"field": "manager:company:name", "operator": "in", "value": ["a", "b"]}),
    ("order_items", {"field": "quantity", "operator": "GreaterThan", "value": "3"}),
]


def wasm_string(s):
    return bytes([len(s)]) + s.encode()


def component(sections):
    """A component of custom sections only, as plugins/loader.rs's tests build one."""
    out = b"\0asm\x0d\0\x01\0"
    for name, payload in sections:
        body = wasm_string(name) + payload
        out += b"\0" + bytes([len(body)]) + body
    return out


def producers(field, value):
    return b"\x01" + wasm_string(field) + b"\x01" + wasm_string(value) + wasm_string("1.0")


def core_module_named(name):
    names = b"\x00\x11\x01\x00" + wasm_string(name)
    return b"\x01" + bytes([len(names)]) + names


# plugins/loader.rs tests: components, a core module, and `.toml` settings.
PLUGIN_METADATA = [
    component([("producers", producers("language", "Rust"))]),
    component([("producers", producers("language", "Rust")),
               ("component-name", core_module_named("libpython3.14.so"))]),
    component([("producers", producers("processed-by", "wit-component")),
               ("component-name", core_module_named("main"))]),
    component([("producers", producers("language", "C11")),
               ("producers", producers("processed-by", "ComponentizeJS"))]),
    component([("producers", producers("language", "C11")),
               ("producers", producers("processed-by", "ComponentizeJS")),
               ("canopy-language", b"typescript")]),
    b"\0asm\x01\0\0\0" + b"\0" + bytes([len(wasm_string("producers") + producers("language", "Go"))])
        + wasm_string("producers") + producers("language", "Go"),
    b"not wasm",
    b"language = \"go\"\n",
    b"[options]\nvip = 1000\n[limits]\ncompute_ms = 50\n",
    b"[limits]\nbogus = 1\n",
    b"[limits]\nconcurrency = 3\nqueue_ms = 10\nbreaker_failures = 0\n"
        b"breaker_window_ms = 20\nbreaker_cooldown_ms = 30\nmemory_mb = 18446744073709551615\n",
    b"[[use]]\ncollection = \"orders\"\n[use.options]\nx = \"y\"\n[[use]]\n",
    b"use = []\nunscoped_reads = [\"books\", \"nope\"]\n",
    b"[[use]]\ncolection = \"x\"\n",
]


def write(target, inputs):
    directory = CORPUS / target
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("seed-*"):
        old.unlink()
    for i, data in enumerate(inputs):
        (directory / f"seed-{i:02}").write_bytes(data if isinstance(data, bytes) else data.encode())


def lines(*parts):
    return "\n".join(p if isinstance(p, str) else json.dumps(p) for p in parts)


write("query_string", [lines(*seed) for seed in QUERY_STRING])
write("body", [lines(*seed) for seed in BODY])
write("webhook", [lines(*seed) for seed in WEBHOOK])
write("oauth", [lines(*seed) for seed in OAUTH])
write("mcp_filter", [lines(*seed) for seed in MCP_FILTER])
write("plugin_metadata", PLUGIN_METADATA)

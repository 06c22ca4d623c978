"""The ``kit-py`` plugin, built, served by a throwaway Canopy and called as a user who may browse,
read and add customers and say hello, but not delete. (Copied into a plugin made by
``canopy plugin new kit-py --lang python`` as ``tests/test_plugin.py`` by
host/tests/testing_kit.rs; run with ``./build.sh && PYTHONPATH=vendor python -m pytest tests``.)
"""

from pathlib import Path

import pytest

from canopy_sdk.testing import RequestError, start_test_server

HERE = Path(__file__).resolve().parent.parent

SEED = """CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
          INSERT INTO customers (id, name) VALUES (1, 'Ada'), (2, 'Grace');"""


def test_the_plugin_serves_its_field_action_and_chart_within_the_users_rights() -> None:
    with start_test_server(
        plugin=HERE / "kit-py.wasm",
        seed_sql=SEED,
        rights={
            "collections": {"customers": ["browse", "read", "add"]},
            "actions": {"customers": ["Say hello"]},
        },
        level="user",
    ) as server:
        customers = server.client.collection("customers")

        assert customers.list(fields=["id", "greeting"], sort="id") == [
            {"id": 1, "greeting": "Hello from kit-py, 1"},
            {"id": 2, "greeting": "Hello from kit-py, 2"},
        ]
        assert customers.count(filter={"field": "name", "operator": "equal", "value": "Ada"}) == 1

        assert customers.action("Say hello").form(ids=["2"])["fields"] == []
        said = customers.action("Say hello").execute({}, ids=["2"])
        assert said["success"] == "Hello from kit-py to record 2"

        assert customers.chart("Seven", record_id="1") == {"countCurrent": 7}
        assert server.client.chart("Greetings") == {"countCurrent": 42}

        assert customers.create({"name": "Linus"})["id"] == 3
        assert customers.get("3")["greeting"] == "Hello from kit-py, 3"
        assert customers.count() == 3

        with pytest.raises(RequestError) as refused:
            customers.delete("3")
        assert refused.value.status == 403

"""The export classes driven as the host drives them, on plain CPython, against the bindings
componentize-py generates (skipped when componentize-py is not installed). The host's imports
(`collections`, `environment`, `logging`) are replaced by fakes answering from a small table.

Run: `PYTHONPATH=sdk/python/src python -m pytest sdk/python/tests` with componentize-py 0.25.1
on PATH."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
CPY = shutil.which("componentize-py")

pytestmark = pytest.mark.skipif(CPY is None, reason="componentize-py is not installed")

CUSTOMERS = [
    {"id": 1.0, "first_name": "Ann", "last_name": "Lee", "email": "ann@x.io"},
    {"id": 2.0, "first_name": "Bo", "last_name": "Ré", "email": "bo@x.io"},
]


@pytest.fixture(scope="module")
def wit(tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("bindings")
    subprocess.run([CPY, "-d", str(ROOT / "wit/plugin@0.3.0"), "-w", "customization",
                    "bindings", str(out)], check=True, capture_output=True)
    sys.path.insert(0, str(out))
    import canopy_sdk._wit as w

    importlib.reload(w)
    types = w.types
    logs: list[str] = []

    def list_(collection: str, filter_json: str, projection: list[str], sort_json: str,
              page: Any) -> Any:
        flt = json.loads(filter_json)
        rows = [r for r in CUSTOMERS if flt is None or r["id"] == flt.get("value")]
        cols = []
        for p in projection:
            cells = [r.get(p) for r in rows]
            data = (types.Column_Numbers(cells) if p == "id" else types.Column_Strings(cells))
            cols.append(types.NamedColumn(p, data))
        return types.Batch(len(rows), cols)

    w.collections.list = list_
    w.environment.options = lambda: "{}"
    w.environment.schema = lambda: '{"collections": []}'
    w.environment.scope = lambda: None
    w.logging.log = lambda level, message: logs.append(message)
    w.logs = logs
    yield w
    sys.path.remove(str(out))


def call_ctx(w: Any, collection: str) -> Any:
    caller = w.types.Caller(1, "a@b.c", "A", "B", "team", "Admin", [], "UTC")
    return w.types.CallContext(caller, collection)


def plugin(w: Any) -> Any:
    from canopy_sdk import (ActionResult, ColumnType, Field, FieldType, Scope, Texts,
                            ValidationError, export_plugin)

    def customize(ds: Any) -> None:
        customers = ds.collection("customers")

        @customers.computed_field("full_name", ColumnType.STRING, ["first_name", "last_name"])
        def full_name(rows: Any, ctx: Any) -> Texts:
            return Texts.of([f"{f} {l}" for f, l in zip(rows.text("first_name"),
                                                          rows.text("last_name"))])

        @customers.hook("Before", "Create")
        def check(ctx: Any) -> None:
            for r in ctx.data:
                if "@" not in r.get("email", ""):
                    raise ValidationError("bad email")
                r["email"] = r["email"].lower()

        @customers.action("Greet", Scope.SINGLE, form=[
            Field("Message", FieldType.STRING, value=lambda c: "Hi " + c.get_field("first_name"))])
        def greet(ctx: Any) -> ActionResult:
            print("greeting")
            return ActionResult.success(ctx.form_value("Message") or "")

        @customers.chart("broken")
        def broken(ctx: Any) -> Any:
            return 1 / 0

    return export_plugin(customize)


def test_declare_compute_action_hook_and_errors(wit: Any) -> None:
    Customizer, Workflow = plugin(wit)
    c = Customizer()
    declared = c.declare('{"collections": []}', "{}")
    assert [(d.kind.name, d.name, d.handler) for d in declared] == [
        ("FIELD", "full_name", 0), ("HOOK", "Before Create", 1), ("ACTION", "Greet", 2),
        ("CHART", "broken", 3)]
    assert json.loads(declared[2].definition)["dynamicForm"] is True
    assert Workflow().declare_steps() == []

    packed = wit.packed
    batch = packed.Batch(2, [
        packed.NamedColumn("first_name", packed.Column_Strings(packed.Texts("AnnBo", [3, 5], []))),
        packed.NamedColumn("last_name", packed.Column_Strings(packed.Texts("LeeRé", [3, 6], []))),
    ])
    out = c.compute(0, call_ctx(wit, "customers"), batch)
    assert (out.value.text, out.value.ends, out.value.nulls) == ("Ann LeeBo Ré", [7, 13], [])

    action = json.dumps({"hook": "load", "formValues": {}, "primaryKeys": ["id"],
                         "filter": {"field": "id", "operator": "Equal", "value": 2}})
    form = json.loads(c.action_form(2, call_ctx(wit, "customers"), action))
    assert form[0]["value"] == "Hi Bo"
    done = c.action_execute(2, call_ctx(wit, "customers"),
                            json.dumps({"hook": "execute", "formValues": {"Message": "Yo"}}))
    assert json.loads(done.result)["message"] == "Yo" and done.file is None
    assert "greeting" in wit.logs  # print() went to the host's log

    ok = c.hook(1, call_ctx(wit, "customers"), json.dumps({"data": [{"email": "A@B.C"}]}))
    assert json.loads(ok) == [{"email": "a@b.c"}]
    with pytest.raises(wit.Err) as refused:
        c.hook(1, call_ctx(wit, "customers"), json.dumps({"data": [{"email": "nope"}]}))
    assert refused.value.value == wit.types.Error_Validation("bad email")
    with pytest.raises(wit.Err) as bug:
        c.chart(3, call_ctx(wit, "customers"), "{}")
    assert isinstance(bug.value.value, wit.types.Error_Internal)
    assert bug.value.value.value.startswith("ZeroDivisionError: division by zero (at ")
    with pytest.raises(wit.Err):
        c.segment(0, call_ctx(wit, "customers"))  # handler 0 is a field


def test_a_plugin_declared_at_import_answers_without_customize(wit: Any) -> None:
    from canopy_sdk import ChartResult, Plugin

    plugin = Plugin()
    seen: list[Any] = []

    @plugin.collection("orders").chart("threshold")
    def threshold(ctx: Any) -> ChartResult:
        seen.append(plugin.options)  # read from the host (here: declare's) at call time
        return ChartResult.value(float(plugin.options.get("limit", 0)))

    Customizer, _ = plugin.export()
    c = Customizer()
    declared = c.declare('{"collections": []}', '{"limit": 7}')
    assert [(d.kind.name, d.name, d.handler) for d in declared] == [("CHART", "threshold", 0)]
    assert json.loads(c.chart(0, call_ctx(wit, "orders"), "{}"))["value"] == 7.0
    assert seen == [{"limit": 7}]

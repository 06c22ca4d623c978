"""Unit tests of the SDK's pure-Python parts (no host, no bindings): packing, rows, forms,
results and declarations. Run with `python -m pytest sdk/python/tests` (CPython 3.11+)."""

from __future__ import annotations

import pytest

from canopy_sdk import (
    Action,
    ActionContext,
    ActionResult,
    ChartResult,
    Column,
    ColumnType,
    Context,
    DataSource,
    Field,
    FieldType,
    HtmlBlock,
    Page,
    Row,
    Rows,
    Scope,
    Separator,
    StepContext,
    Texts,
    ValidationError,
)
from canopy_sdk.customize import ComputedField


def ctx(payload: dict) -> ActionContext:
    return ActionContext(Context(), payload)


def ok(_: ActionContext) -> ActionResult:
    return ActionResult.success("ok")


def test_cells_read_back_as_packed_with_nulls_and_empty_strings_apart() -> None:
    t = Texts.of(["Ann", None, "", "Boé#7", None])
    assert (t.text, t.ends, t.nulls) == ("AnnBoé#7", [3, 3, 3, 9, 9], [1, 4])
    assert list(Texts(t.text, t.ends, t.nulls)) == ["Ann", None, "", "Boé#7", None]
    assert Texts("abc", [1, 3], []).cells() == ["a", "bc"]


def test_offsets_that_split_a_character_read_as_null() -> None:
    assert Texts("é", [1, 2], []).cells() == [None, None]


def test_rows_hand_out_integral_numbers_as_ints_and_any_column_as_text() -> None:
    rows = Rows(2, {"id": Column.numbers([1.0, 2.5]), "name": Column.strings(Texts.of(["a", None])),
                    "vip": Column.booleans([True, None]), "tags": Column.json([[1], None])})
    assert rows.records() == [{"id": 1, "name": "a", "vip": True, "tags": [1]},
                              {"id": 2.5, "name": None, "vip": None, "tags": None}]
    assert rows.texts("id") == ["1", "2.5"]
    assert rows.texts("vip") == ["true", None]
    assert rows.text("name") == ["a", None]
    with pytest.raises(Exception):
        rows.numbers("name")


def test_a_computed_answer_is_converted_by_the_column_type() -> None:
    number = ComputedField(ColumnType.NUMBER, [], lambda r, c: [])
    assert number.to_column([1, None]).kind.value == "numbers"
    assert number.to_column(["12.30", None]).kind.value == "strings"
    assert ComputedField(["String"], [], lambda r, c: []).to_column([["a"]]).cells() == ['["a"]']
    assert ComputedField(ColumnType.ENUM, [], lambda r, c: []).to_column(["a"]).cells() == ["a"]
    packed_json = ComputedField(ColumnType.JSON, [], lambda r, c: []).to_column(Texts.of(['{"a":1}']))
    assert packed_json.kind.value == "json" and packed_json.value(0) == {"a": 1}


def test_a_form_with_a_function_is_dynamic_and_its_static_shape_omits_computed_properties() -> None:
    a = Action(Scope.SINGLE, ok, form=[
        Field("Amount", FieldType.NUMBER, required=True),
        Field("Reason", FieldType.ENUM, enum_values=lambda c: ["a"]),
    ])
    d = a.definition()
    assert d["dynamicForm"] is True
    assert d["form"][0]["isRequired"] is True
    assert "enumValues" not in d["form"][1]


def test_evaluating_a_form_applies_visible_if_computes_values_and_watches_read_fields() -> None:
    a = Action(Scope.SINGLE, ok, form=[
        Field("Kind", FieldType.ENUM, enum_values=["gift", "refund"]),
        Field("Note", FieldType.STRING, visible_if=lambda c: c.form_value("Kind") == "gift"),
        Field("Total", FieldType.NUMBER, value=lambda c: 1 if c.has_field_changed("Kind") else 0),
    ])
    assert len(a.evaluate_form(ctx({"formValues": {"Kind": "refund"}}))) == 2
    shown = a.evaluate_form(ctx({"formValues": {"Kind": "gift"}, "changedField": "Kind"}))
    assert shown[1]["id"] == "Note"
    assert shown[0]["value"] == "gift"
    assert shown[0]["watchChanges"] is True
    assert shown[1]["watchChanges"] is False
    assert shown[2]["value"] == 1


def test_the_search_hook_rebuilds_only_the_searched_field() -> None:
    a = Action(Scope.GLOBAL, ok, form=[
        Field("A", FieldType.STRING),
        Row([Field("B", FieldType.STRING, widget="Dropdown",
                   options=lambda c, s: [(s or "", 1)])]),
    ])
    f = a.evaluate_form(ctx({"searchField": "B", "searchValue": "ab"}))
    assert f == [{"id": "B", "label": "B", "type": "String", "isRequired": False,
                  "isReadOnly": False, "widget": "Dropdown", "search": "dynamic",
                  "options": [{"label": "ab", "value": 1}], "watchChanges": False}]


def test_layouts_keep_the_toolkit_shape_and_pages_drop_emptied_rows() -> None:
    static = Action(Scope.SINGLE, ok, form=[HtmlBlock("<b>Hi</b>"), Separator(),
                                            Row([Field("First", FieldType.STRING)])])
    d = static.definition()
    assert d["dynamicForm"] is False
    assert d["form"][:2] == [{"type": "Layout", "component": "HtmlBlock", "content": "<b>Hi</b>"},
                             {"type": "Layout", "component": "Separator"}]
    paged = Action(Scope.GLOBAL, ok, form=[
        Page([Field("Kind", FieldType.STRING),
              HtmlBlock(lambda c: f"<p>{c.form_value('Kind')}</p>")], next_button_label="Go on"),
        Page([Row([Field("Note", FieldType.STRING, visible_if=lambda c: False)])],
             previous_button_label="Back"),
        Page([Field("Last", FieldType.NUMBER)]),
    ])
    f = paged.evaluate_form(ctx({"hook": "load", "formValues": {"Kind": "gift"}}))
    assert len(f) == 2
    assert f[0]["nextButtonLabel"] == "Go on"
    assert f[0]["elements"][0]["watchChanges"] is True
    assert f[0]["elements"][1]["content"] == "<p>gift</p>"
    # At execute hidden fields stay, inside their row.
    f = paged.evaluate_form(ctx({"hook": "execute"}))
    assert f[1]["elements"][0]["fields"][0]["id"] == "Note"
    with pytest.raises(ValidationError):
        Action(Scope.GLOBAL, ok, form=[Page([]), Separator()]).definition()
    with pytest.raises(ValidationError):
        Action(Scope.GLOBAL, ok, form=[Row([Separator()])]).definition()


def test_results_carry_their_type_html_invalidated_headers_and_file_bytes() -> None:
    r = ActionResult.success("Done", html="<b>ok</b>", invalidated=["orders"]).header("X-A", "1")
    assert r.to_json() == {"type": "Success", "message": "Done", "html": "<b>ok</b>",
                           "invalidated": ["orders"], "responseHeaders": {"X-A": "1"}}
    f = ActionResult.file("a,b", "x.csv", "text/csv")
    assert f.file_bytes == b"a,b" and f.to_json()["mimeType"] == "text/csv"
    assert ChartResult.distribution({"a": 1}).to_json() == {
        "type": "Distribution", "entries": [{"key": "a", "value": 1}]}


def test_declarations_number_their_handlers_in_order() -> None:
    ds = DataSource({"collections": []}, {})
    customers = ds.collection("customers")

    @customers.computed_field("full_name", ColumnType.STRING, ["first_name"])
    def full_name(rows: Rows, c: Context) -> list:
        return list(rows.text("first_name"))

    customers.add_segment("VIP", {"field": "vip", "operator": "Equal", "value": True})
    customers.replace_search(only=["email"])
    ds.add_workflow_step("review", lambda step: None)
    assert [(d.kind, d.name, d.handler) for d in ds.declarations] == [
        ("field", "full_name", 0), ("segment", "VIP", 1), ("search", "", 2)]
    assert ds.steps == [("review", 3)]
    assert ds.declarations[2].definition == {"onlyFields": ["email"], "includeFields": [],
                                             "excludeFields": []}


def test_a_step_filters_its_record_by_the_primary_keys_of_the_schema() -> None:
    schema = {"collections": [{"name": "order_items", "fields": [
        {"name": "order_id", "isPrimaryKey": True}, {"name": "product_id", "isPrimaryKey": True},
        {"name": "quantity"}]}]}
    step = StepContext(Context(collection_name="order_items"), "3|7", {}, None, schema)
    assert step.record_filter() == {"aggregator": "And", "conditions": [
        {"field": "order_id", "operator": "Equal", "value": "3"},
        {"field": "product_id", "operator": "Equal", "value": "7"}]}
    with pytest.raises(ValidationError):
        StepContext(Context(collection_name="order_items"), "3", {}, None, schema).record_filter()

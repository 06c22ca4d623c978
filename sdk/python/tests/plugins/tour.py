"""A plugin declaring the kinds the shop example does not use, on the shop database, to check in
the real host that their definitions load and their handlers answer: renamed and removed fields,
a written computed field, an external relation, many-to-one and one-to-one relations, an
emulated operator, the other chart results, disabled search, create and update overrides, and a
workflow step (served with `tour-workflows/score.toml`). See NOTES-python.md."""

from __future__ import annotations

from typing import Any, Optional

from canopy_sdk import (
    ChartContext,
    ChartResult,
    ColumnType,
    Context,
    DataSource,
    Rows,
    StepContext,
    StepOutput,
    TimeRange,
    WriteContext,
    as_number,
    export_plugin,
)


def customize(ds: DataSource) -> None:
    customers = ds.collection("customers")
    customers.rename_field("created_at", "signed_up_at").remove_field("address")
    customers.set_field_nullable("last_name")

    @customers.computed_field("full_name", ColumnType.STRING, ["first_name", "last_name"])
    def full_name(rows: Rows, ctx: Context) -> list[str]:
        return [f"{f or ''} {l or ''}" for f, l in zip(rows.text("first_name"),
                                                        rows.text("last_name"))]

    @customers.field_writing("full_name")
    def write_full_name(value: Any, ctx: WriteContext) -> Optional[dict[str, Any]]:
        first, _, last = str(value or "").partition(" ")
        return {"first_name": first, "last_name": last}

    customers.add_external_relation(
        "notes", {"text": "String", "n": "Number"},
        lambda record, ctx: [{"text": f"note {i} on {record['id']}", "n": i} for i in (1, 2)])

    orders = ds.collection("orders")
    orders.add_many_to_one_relation("buyer", "customers", "customer_id")
    orders.add_one_to_one_relation("first_item", "order_items", "order_id")

    @orders.computed_field("status_label", ColumnType.STRING, ["status"])
    def status_label(rows: Rows, ctx: Context) -> list[Optional[str]]:
        return [None if s is None else s.upper() for s in rows.text("status")]

    orders.emulate_field_operator("status_label", "Equal")

    @orders.chart("per_month")
    def per_month(ctx: ChartContext) -> ChartResult:
        return ChartResult.time_based(TimeRange.MONTH, [("2024-01-01", 3.0), ("2024-03-01", 5.0)])

    @orders.chart("top")
    def top(ctx: ChartContext) -> ChartResult:
        return ChartResult.leaderboard({"b": 2.0, "a": 1.0, "c": 3.0})

    @orders.chart("share")
    def share(ctx: ChartContext) -> ChartResult:
        return ChartResult.percentage(12.5)

    @orders.chart("goal")
    def goal(ctx: ChartContext) -> ChartResult:
        return ChartResult.objective(30.0, 100.0)

    tags = ds.collection("tags")
    tags.disable_search()

    @tags.override("create")
    def create_tags(data: list[dict[str, Any]], ctx: Context) -> list[dict[str, Any]]:
        shouted = [{**r, "label": str(r.get("label", "")).upper()} for r in data]
        return ctx.collection("tags").create(shouted)

    @tags.override("update")
    def update_tags(filter: Any, patch: dict[str, Any], ctx: Context) -> None:
        if "label" in patch:
            patch = {**patch, "label": f"{patch['label']}!"}
        ctx.collection("tags").update(filter, patch)

    @ds.workflow_step("score")
    def score(step: StepContext) -> StepOutput:
        order = step.get_record(["status", "total"])
        threshold = as_number(step.setting("threshold")) or 500.0
        total = as_number(order.get("total")) or 0.0
        return StepOutput.choose("big" if total > threshold else "small").value("total", total)


Customizer, Workflow = export_plugin(customize)

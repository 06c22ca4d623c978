"""The shop demo's plugin in Python: what ``examples/shop/plugin/src/lib.rs`` does, customization
for customization, with the same names and answers (see ``examples/shop/README.md``).

- computed fields: ``customers.full_name``, and ``orders.customer_name`` through the ``customer``
  relation (which reads ``full_name``, a computed field of another collection);
- actions: ``Offer a coupon`` (Single, with a dynamic form), ``Mark as VIP`` (Bulk), ``Export
  orders`` (Global, a generated file), ``Refund`` (Single, on a paid, shipped or delivered
  order), ``Attach a document`` (Single, a file field), ``Ship the order`` (Single, a form of two
  pages), ``Notify the warehouse`` (Single, a webhook result the browser calls);
- a hook: Before Create on customers refuses an email without ``@`` and lower-cases it;
- segments: ``VIP customers`` (static) and ``Above average`` orders (dynamic, from an aggregate);
- search: customers by email and names only; orders by a handler (a number is an id, a word a
  status);
- charts: ``lifetime_value`` on a customer, ``items_ordered`` on an order (an error on a
  cancelled one), ``orders_by_status`` on the dashboard;
- relations: ``customers.purchases`` (one-to-many), ``products.labels`` (many-to-many through
  ``product_tags``); ``orders.customer_email`` imported read-only from the customer;
- ``products.price_band``, filtered and sorted through ``price``; a price validation; products'
  delete overridden (the stock is emptied); ``customer_name`` sorted in memory; no count on
  ``order_items``.

Build with ``./build.sh`` (componentize-py), which writes ``shop.wasm``.
"""

from __future__ import annotations

import math
import re
from typing import Any, Optional, Union

from canopy_sdk import (
    ActionContext,
    ActionResult,
    ChartContext,
    ChartResult,
    ColumnType,
    Context,
    DataSource,
    Field,
    FieldType,
    HookContext,
    Page,
    Rows,
    Scope,
    Texts,
    ValidationError,
    as_number,
    as_text,
    export_plugin,
)

#: A product at this price or above is in the ``premium`` band.
PREMIUM = 20.0

#: The statuses of ``orders.status``: the seed's, and ``refunded``, which ``Refund`` sets.
STATUSES = ("pending", "paid", "shipped", "delivered", "cancelled", "refunded")

#: The statuses of an order that was paid for, so can be refunded.
REFUNDABLE = ("paid", "shipped", "delivered")

_INTEGER = re.compile(r"[+-]?[0-9]+")


def number(v: Any) -> str:
    """A number as a person writes it: an integral one without ``.0`` (numbers cross as floats,
    so an id is ``1.0``); exact ones (PostgreSQL's NUMERIC totals, bigints) come as text, kept
    as they are (``"12.30"``)."""
    if isinstance(v, str):
        return v
    n = as_number(v)
    if n is None:
        return ""
    if math.isfinite(n) and n == int(n) and abs(n) < 1e15:
        return str(int(n))
    return repr(n)


def text_or(value: Any, default: str) -> str:
    """The value when it is text (even empty), else ``default``."""
    text = as_text(value)
    return default if text is None else text


def record_id_value(record_id: Any) -> Any:
    """A chart's record id (packed text, ``"1"``) as the number it stands for, else as is."""
    if isinstance(record_id, str):
        try:
            return float(record_id)
        except ValueError:
            return record_id
    return record_id


def customize(ds: DataSource) -> None:
    # A coupon above this amount needs a reason (the form shows the field only then).
    coupon_reason_above = as_number(ds.options.get("couponReasonAbove"))
    if coupon_reason_above is None:
        coupon_reason_above = 50.0

    # ---- customers ---------------------------------------------------------------------------
    customers = ds.collection("customers")

    @customers.computed_field("full_name", ColumnType.STRING, ["first_name", "last_name"])
    def full_name(rows: Rows, ctx: Context) -> Texts:
        # One string per row, packed into one buffer on the way back.
        return Texts.of([f"{f or ''} {l or ''}"
                         for f, l in zip(rows.text("first_name"), rows.text("last_name"))])

    @customers.hook("Before", "Create")
    def check_email(ctx: HookContext) -> None:
        for record in ctx.data:
            email = as_text(record.get("email")) if isinstance(record, dict) else None
            if email is None:
                continue
            if "@" not in email:
                raise ValidationError(f"`{email}` is not an email address")
            record["email"] = email.lower()

    customers.add_segment("VIP customers",
                          {"field": "is_vip", "operator": "Equal", "value": True})
    customers.replace_search(only=["email", "first_name", "last_name"])

    def greeting(ctx: ActionContext) -> Any:
        # A dynamic value: greets the selected customer by name.
        name = ctx.get_field("first_name")
        return f"Hello {as_text(name) or ''}, here is a gift."

    def reason_shown(ctx: ActionContext) -> bool:
        return (as_number(ctx.form_value("Amount")) or 0.0) > coupon_reason_above

    @customers.action(
        "Offer a coupon", Scope.SINGLE,
        description="Sends the customer a coupon code",
        submit_button_label="Send the coupon",
        form=[
            Field("Amount", FieldType.NUMBER, required=True, default_value=10,
                  widget="NumberInput", properties={"min": 1, "step": 1}),
            Field("Kind", FieldType.ENUM, enum_values=["Fixed", "Percent"]),
            Field("Message", FieldType.STRING, widget="TextArea", value=greeting),
            Field("Reason", FieldType.STRING, visible_if=reason_shown),
        ])
    def offer_a_coupon(ctx: ActionContext) -> ActionResult:
        customer = ctx.get_record(["full_name", "email"])
        amount = number(as_number(ctx.form_value("Amount")) or 0.0)
        kind = text_or(ctx.form_value("Kind"), "Fixed")
        name = text_or(customer.get("full_name"), "the customer")
        return ActionResult.success(
            f"Coupon of {amount} ({kind}) sent to {name}",
            html=f"<p>Sent to <b>{as_text(customer.get('email')) or ''}</b></p>")

    @customers.action("Mark as VIP", Scope.BULK)
    def mark_as_vip(ctx: ActionContext) -> ActionResult:
        ids = ctx.get_record_ids()
        ctx.collection().update({"field": "id", "operator": "In", "value": ids},
                                {"is_vip": True})
        return ActionResult.success(f"{len(ids)} customers are now VIP", invalidated=["orders"])

    @customers.chart("lifetime_value")
    def lifetime_value(ctx: ChartContext) -> ChartResult:
        record = {"field": "customer_id", "operator": "Equal",
                  "value": record_id_value(ctx.record_id)}
        rows = ctx.context.collection("orders").aggregate(
            record, {"operation": "Sum", "field": "total"})
        return ChartResult.value(as_number(rows[0].get("value")) or 0.0)

    # ---- orders ------------------------------------------------------------------------------
    orders = ds.collection("orders")

    # Depends on a computed field of another collection, through a to-one relation.
    @orders.computed_field("customer_name", ColumnType.STRING, ["customer:full_name"])
    def customer_name(rows: Rows, ctx: Context) -> Texts:
        return Texts.of(rows.text("customer:full_name"))

    @orders.segment("Above average")
    def above_average(ctx: Context) -> Any:
        rows = ctx.this().aggregate(None, {"operation": "Avg", "field": "total"})
        average = as_number(rows[0].get("value")) or 0.0
        return {"field": "total", "operator": "GreaterThan", "value": average}

    @orders.search
    def search_orders(text: str, extended: bool, ctx: Context) -> Optional[Any]:
        text = text.strip()
        if _INTEGER.fullmatch(text) and -(2**63) <= int(text) < 2**63:
            return {"field": "id", "operator": "Equal", "value": int(text)}
        status = text.lower()
        if status in STATUSES:
            return {"field": "status", "operator": "Equal", "value": status}
        # Matches nothing: an id is never negative.
        return {"field": "id", "operator": "Equal", "value": -1}

    @orders.action("Export orders", Scope.GLOBAL, generate_file=True,
                   description="The first 100 orders as CSV")
    def export_orders(ctx: ActionContext) -> ActionResult:
        rows = ctx.collection().list(None, ["id", "status", "total"],
                                     [{"field": "id", "ascending": True}], (0, 100))
        lines = ["id,status,total"]
        for record in rows.records():
            lines.append(f"{number(record['id'])},{as_text(record['status']) or ''},"
                         f"{number(record['total'])}")
        return ActionResult.file("\n".join(lines) + "\n", "orders.csv", "text/csv")

    @orders.action("Refund", Scope.SINGLE,
                   description="Refunds the order and marks it refunded",
                   submit_button_label="Refund",
                   form=[Field("Reason", FieldType.STRING, widget="TextArea")])
    def refund(ctx: ActionContext) -> ActionResult:
        order = ctx.get_record(["id", "status", "total"])
        status = as_text(order.get("status")) or ""
        id = number(order.get("id"))
        # An error result, not an exception: the person (or the workflow run) sees why.
        if status not in REFUNDABLE:
            return ActionResult.error(
                f"Order #{id} is {status}: only a paid, shipped or delivered order can be "
                "refunded")
        ctx.collection().update({"field": "id", "operator": "Equal", "value": order.get("id")},
                                {"status": "refunded"})
        reason = as_text(ctx.form_value("Reason")) or "no reason given"
        return ActionResult.success(f"Order #{id} refunded ({number(order.get('total'))}): "
                                    f"{reason}")

    @orders.action("Attach a document", Scope.SINGLE,
                   description="Attaches a file (an invoice, a receipt) to the order",
                   form=[Field("Document", FieldType.FILE, required=True)])
    def attach_a_document(ctx: ActionContext) -> ActionResult:
        order = ctx.get_record(["id"])
        # A file arrives as a data URI: `data:<mime>;name=<name>;base64,<bytes>`.
        uri = as_text(ctx.form_value("Document")) or ""
        meta, _, data = uri.partition(",") if "," in uri else ("", "", "")
        name = next((part[len("name="):] for part in meta.split(";")
                     if part.startswith("name=")), "a document")
        padding = len(data) - len(data.rstrip("="))
        size = max(len(data) // 4 * 3 - padding, 0)
        return ActionResult.success(
            f"Attached {name} ({size} bytes) to order #{number(order.get('id'))}")

    # A form of two pages: the parcel, then what the customer is told (the message shows only
    # when the customer is notified: a change hook across pages).
    @orders.action(
        "Ship the order", Scope.SINGLE,
        description="Marks the order shipped, in two steps: the parcel, then the customer",
        submit_button_label="Ship it",
        form=[
            Page([
                Field("Carrier", FieldType.ENUM, enum_values=["Post", "Courier", "Pickup"],
                      required=True),
                Field("Tracking number", FieldType.STRING, required=True),
            ], next_button_label="Next: the customer"),
            Page([
                Field("Notify the customer", FieldType.BOOLEAN, default_value=True),
                Field("Message", FieldType.STRING, widget="TextArea",
                      visible_if=lambda ctx: ctx.form_value("Notify the customer") is not False),
            ], previous_button_label="Back: the parcel"),
        ])
    def ship_the_order(ctx: ActionContext) -> ActionResult:
        order = ctx.get_record(["id"])
        carrier = as_text(ctx.form_value("Carrier")) or ""
        tracking = as_text(ctx.form_value("Tracking number")) or ""
        ctx.collection().update({"field": "id", "operator": "Equal", "value": order.get("id")},
                                {"status": "shipped"})
        if ctx.form_value("Notify the customer") is False:
            told = "the customer is not told"
        else:
            told = "the customer is told: " + text_or(ctx.form_value("Message"),
                                                      "(no message)")
        return ActionResult.success(
            f"Order #{number(order.get('id'))} shipped by {carrier} ({tracking}); {told}")

    @orders.action(
        "Notify the warehouse", Scope.SINGLE,
        description="Tells the warehouse's service about the order (the browser calls it)",
        form=[Field("Warehouse URL", FieldType.STRING, required=True,
                    default_value="http://127.0.0.1:8900/orders")])
    def notify_the_warehouse(ctx: ActionContext) -> ActionResult:
        order = ctx.get_record(["id", "status"])
        url = as_text(ctx.form_value("Warehouse URL")) or ""
        # The browser makes the call (as Forest's UI does): the warehouse's service must allow
        # this console's origin (CORS).
        return ActionResult.webhook(url, "POST", {"Content-Type": "application/json"},
                                    {"order": number(order.get("id")),
                                     "status": order.get("status")})

    # A record chart that can fail: a cancelled order's items went back to stock, and the chart
    # says so in place of a figure (the console shows the message).
    @orders.chart("items_ordered")
    def items_ordered(ctx: ChartContext) -> ChartResult:
        id = record_id_value(ctx.record_id)
        order = ctx.context.collection("orders").list(
            {"field": "id", "operator": "Equal", "value": id}, ["status"],
            [{"field": "id", "ascending": True}], (0, 1))
        records = order.records()
        status = (as_text(records[0].get("status")) if records else None) or ""
        if status == "cancelled":
            raise ValidationError("This order is cancelled: its items went back to stock, so "
                                  "none is counted")
        rows = ctx.context.collection("order_items").aggregate(
            {"field": "order_id", "operator": "Equal", "value": id},
            {"operation": "Sum", "field": "quantity"})
        return ChartResult.value(as_number(rows[0].get("value")) or 0.0)

    # The customer's email as a read-only field of the order.
    orders.import_field("customer_email", "customer:email", readonly=True)
    # A computed field cannot be sorted by the database: sorted in memory.
    orders.emulate_field_sorting("customer_name")

    # Every order of a customer, as a relation declared over the keys.
    ds.collection("customers").add_one_to_many_relation("purchases", "orders", "customer_id")

    # ---- products ----------------------------------------------------------------------------
    products = ds.collection("products")

    @products.computed_field("price_band", ColumnType.ENUM, ["price"],
                             enum_values=["budget", "premium"])
    def price_band(rows: Rows, ctx: Context) -> list[Optional[str]]:
        bands: list[Optional[str]] = []
        for price in rows.texts("price"):
            try:
                value: Union[float, None] = float(price) if price is not None else None
            except ValueError:
                value = None
            bands.append(None if value is None else "budget" if value < PREMIUM else "premium")
        return bands

    # Filtering and sorting the band go to the price, which the database answers.
    @products.field_operator("price_band", "Equal")
    def price_band_equal(value: Any, ctx: Context) -> Any:
        premium = value == "premium"
        return {"field": "price", "operator": "GreaterThan" if premium else "LessThan",
                "value": PREMIUM - 0.005 if premium else PREMIUM}

    (products
     .replace_field_sorting("price_band", [("price", True)])
     .add_field_validation("price", "GreaterThan", 0)
     .add_many_to_many_relation("labels", "tags", "product_tags", "product_id", "tag_id"))

    # Products are kept for the order history: deleting one empties its stock.
    @products.override("delete")
    def keep_deleted_products(filter: Any, ctx: Context) -> None:
        ctx.collection("products").update(filter, {"stock": 0})

    ds.collection("order_items").disable_count()

    @ds.chart("orders_by_status")
    def orders_by_status(ctx: ChartContext) -> ChartResult:
        rows = ctx.context.collection("orders").aggregate(
            None, {"operation": "Count", "groups": [{"field": "status"}]})
        return ChartResult.distribution(
            (as_text((r.get("group") or {}).get("status")) or "",
             as_number(r.get("value")) or 0.0) for r in rows)


# componentize-py looks the export classes up by name in this module.
Customizer, Workflow = export_plugin(customize)

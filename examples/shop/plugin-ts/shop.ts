/**
 * The shop demo's plugin in TypeScript: what `examples/shop/plugin/src/lib.rs` does,
 * customization for customization, with the same names and answers (see
 * `examples/shop/README.md`).
 *
 * - computed fields: `customers.full_name`, and `orders.customer_name` through the `customer`
 *   relation (which reads `full_name`, a computed field of another collection);
 * - actions: `Offer a coupon` (Single, with a dynamic form), `Mark as VIP` (Bulk), `Export
 *   orders` (Global, a generated file), `Refund` (Single, on a paid, shipped or delivered
 *   order), `Attach a document` (Single, a file field), `Ship the order` (Single, a form of two
 *   pages), `Notify the warehouse` (Single, a webhook result the browser calls);
 * - a hook: Before Create on customers refuses an email without `@` and lower-cases it;
 * - segments: `VIP customers` (static) and `Above average` orders (dynamic, from an aggregate);
 * - search: customers by email and names only; orders by a handler (a number is an id, a word a
 *   status);
 * - charts: `lifetime_value` on a customer, `items_ordered` on an order (an error on a cancelled
 *   one), `orders_by_status` on the dashboard;
 * - relations: `customers.purchases` (one-to-many), `products.labels` (many-to-many through
 *   `product_tags`); `orders.customer_email` imported read-only from the customer;
 * - `products.price_band`, filtered and sorted through `price`; a price validation; products'
 *   delete overridden (the stock is emptied); `customer_name` sorted in memory; no count on
 *   `order_items`.
 *
 * Build with `./build.sh`, which writes `shop.wasm`.
 */

import { type ActionContext, ChartResult, type DataSource, type Json, Texts, ValidationError, asNumber, asObject, asText, exportPlugin } from "canopy-sdk";

/** A product at this price or above is in the `premium` band. */
const PREMIUM = 20;

/** The statuses of `orders.status`: the seed's, and `refunded`, which `Refund` sets. */
const STATUSES = ["pending", "paid", "shipped", "delivered", "cancelled", "refunded"];

/** The statuses of an order that was paid for, so can be refunded. */
const REFUNDABLE = ["paid", "shipped", "delivered"];

/**
 * A number as a person writes it (integral ones without a fraction); exact ones (PostgreSQL's
 * NUMERIC totals, bigints) come as text, kept as they are (`"12.30"`).
 */
function number(v: Json | undefined): string {
  if (typeof v === "string") return v;
  const n = asNumber(v);
  if (n === undefined) return "";
  return Number.isInteger(n) && Math.abs(n) < 1e15 ? n.toFixed(0) : String(n);
}

/** The value when it is text (even empty), else `fallback`. */
function textOr(value: Json | undefined, fallback: string): string {
  return asText(value) ?? fallback;
}

/** A chart's record id (packed text, `"1"`) as the number it stands for, else as is. */
function recordIdValue(recordId: Json): Json {
  if (typeof recordId === "string" && recordId.trim() !== "" && !Number.isNaN(Number(recordId))) return Number(recordId);
  return recordId;
}

function customize(ds: DataSource): void {
  // A coupon above this amount needs a reason (the form shows the field only then).
  const couponReasonAbove = asNumber(ds.options.couponReasonAbove) ?? 50;

  // ---- customers ----------------------------------------------------------------------------
  const customers = ds.collection("customers");
  customers.addField("full_name", {
    columnType: "String",
    dependencies: ["first_name", "last_name"],
    // One string per row, packed into one buffer on the way back.
    getValues: (rows) => {
      const last = rows.text("last_name");
      return Texts.of(rows.text("first_name").map((first, i) => `${first ?? ""} ${last[i] ?? ""}`));
    },
  });

  customers.addHook("Before", "Create", (ctx) => {
    for (const record of ctx.data) {
      const email = asText(asObject(record)?.email);
      if (email === undefined) continue;
      if (!email.includes("@")) throw new ValidationError(`\`${email}\` is not an email address`);
      record.email = email.toLowerCase();
    }
  });

  customers.addSegment("VIP customers", { field: "is_vip", operator: "Equal", value: true });
  customers.replaceSearch({ only: ["email", "first_name", "last_name"] });

  // A dynamic value: greets the selected customer by name.
  const greeting = (ctx: ActionContext) => `Hello ${asText(ctx.getField("first_name")) ?? ""}, here is a gift.`;

  customers.addAction("Offer a coupon", {
    scope: "Single",
    description: "Sends the customer a coupon code",
    submitButtonLabel: "Send the coupon",
    form: [
      { label: "Amount", type: "Number", isRequired: true, defaultValue: 10, widget: "NumberInput", properties: { min: 1, step: 1 } },
      { label: "Kind", type: "Enum", enumValues: ["Fixed", "Percent"] },
      { label: "Message", type: "String", widget: "TextArea", value: greeting },
      { label: "Reason", type: "String", if: (ctx) => (asNumber(ctx.formValue("Amount")) ?? 0) > couponReasonAbove },
    ],
    execute: (ctx, result) => {
      const customer = ctx.getRecord(["full_name", "email"]);
      const amount = number(asNumber(ctx.formValue("Amount")) ?? 0);
      const kind = textOr(ctx.formValue("Kind"), "Fixed");
      const name = textOr(customer.full_name, "the customer");
      return result.success(`Coupon of ${amount} (${kind}) sent to ${name}`, { html: `<p>Sent to <b>${asText(customer.email) ?? ""}</b></p>` });
    },
  });

  customers.addAction("Mark as VIP", {
    scope: "Bulk",
    execute: (ctx, result) => {
      const ids = ctx.getRecordIds();
      ctx.collection().update({ field: "id", operator: "In", value: ids }, { is_vip: true });
      return result.success(`${ids.length} customers are now VIP`, { invalidated: ["orders"] });
    },
  });

  customers.addChart("lifetime_value", (ctx) => {
    const record = { field: "customer_id", operator: "Equal", value: recordIdValue(ctx.recordId) };
    const rows = ctx.context.collection("orders").aggregate(record, { operation: "Sum", field: "total" });
    return ChartResult.value(asNumber(rows[0]?.value) ?? 0);
  });

  // ---- orders -------------------------------------------------------------------------------
  const orders = ds.collection("orders");

  // Depends on a computed field of another collection, through a to-one relation.
  orders.addField("customer_name", {
    columnType: "String",
    dependencies: ["customer:full_name"],
    getValues: (rows) => Texts.of(rows.text("customer:full_name")),
  });

  orders.addSegment("Above average", (ctx) => {
    const rows = ctx.this().aggregate(null, { operation: "Avg", field: "total" });
    return { field: "total", operator: "GreaterThan", value: asNumber(rows[0]?.value) ?? 0 };
  });

  orders.replaceSearch((search) => {
    const text = search.trim();
    if (/^[+-]?[0-9]+$/.test(text)) {
      const id = BigInt(text);
      if (id >= -(2n ** 63n) && id < 2n ** 63n) return { field: "id", operator: "Equal", value: Number(id) };
    }
    const status = text.toLowerCase();
    if (STATUSES.includes(status)) return { field: "status", operator: "Equal", value: status };
    // Matches nothing: an id is never negative.
    return { field: "id", operator: "Equal", value: -1 };
  });

  orders.addAction("Export orders", {
    scope: "Global",
    generateFile: true,
    description: "The first 100 orders as CSV",
    execute: (ctx, result) => {
      const rows = ctx.collection().list(null, ["id", "status", "total"], [{ field: "id", ascending: true }], [0, 100]);
      const lines = ["id,status,total", ...rows.records().map((r) => `${number(r.id)},${asText(r.status) ?? ""},${number(r.total)}`)];
      return result.file(`${lines.join("\n")}\n`, "orders.csv", "text/csv");
    },
  });

  orders.addAction("Refund", {
    scope: "Single",
    description: "Refunds the order and marks it refunded",
    submitButtonLabel: "Refund",
    form: [{ label: "Reason", type: "String", widget: "TextArea" }],
    execute: (ctx, result) => {
      const order = ctx.getRecord(["id", "status", "total"]);
      const status = asText(order.status) ?? "";
      const id = number(order.id);
      // An error result, not an exception: the person (or the workflow run) sees why.
      if (!REFUNDABLE.includes(status)) return result.error(`Order #${id} is ${status}: only a paid, shipped or delivered order can be refunded`);
      ctx.collection().update({ field: "id", operator: "Equal", value: order.id ?? null }, { status: "refunded" });
      const reason = asText(ctx.formValue("Reason")) || "no reason given";
      return result.success(`Order #${id} refunded (${number(order.total)}): ${reason}`);
    },
  });

  orders.addAction("Attach a document", {
    scope: "Single",
    description: "Attaches a file (an invoice, a receipt) to the order",
    form: [{ label: "Document", type: "File", isRequired: true }],
    execute: (ctx, result) => {
      const order = ctx.getRecord(["id"]);
      // A file arrives as a data URI: `data:<mime>;name=<name>;base64,<bytes>`.
      const uri = asText(ctx.formValue("Document")) ?? "";
      const comma = uri.indexOf(",");
      const [meta, data] = comma >= 0 ? [uri.slice(0, comma), uri.slice(comma + 1)] : ["", ""];
      const name = meta.split(";").find((part) => part.startsWith("name="))?.slice("name=".length) ?? "a document";
      const padding = data.length - data.replace(/=+$/, "").length;
      const size = Math.max(Math.floor(data.length / 4) * 3 - padding, 0);
      return result.success(`Attached ${name} (${size} bytes) to order #${number(order.id)}`);
    },
  });

  // A form of two pages: the parcel, then what the customer is told (the message shows only when
  // the customer is notified: a change hook across pages).
  orders.addAction("Ship the order", {
    scope: "Single",
    description: "Marks the order shipped, in two steps: the parcel, then the customer",
    submitButtonLabel: "Ship it",
    form: [
      {
        type: "Layout",
        component: "Page",
        nextButtonLabel: "Next: the customer",
        elements: [
          { label: "Carrier", type: "Enum", enumValues: ["Post", "Courier", "Pickup"], isRequired: true },
          { label: "Tracking number", type: "String", isRequired: true },
        ],
      },
      {
        type: "Layout",
        component: "Page",
        previousButtonLabel: "Back: the parcel",
        elements: [
          { label: "Notify the customer", type: "Boolean", defaultValue: true },
          { label: "Message", type: "String", widget: "TextArea", if: (ctx) => ctx.formValue("Notify the customer") !== false },
        ],
      },
    ],
    execute: (ctx, result) => {
      const order = ctx.getRecord(["id"]);
      const carrier = asText(ctx.formValue("Carrier")) ?? "";
      const tracking = asText(ctx.formValue("Tracking number")) ?? "";
      ctx.collection().update({ field: "id", operator: "Equal", value: order.id ?? null }, { status: "shipped" });
      const told =
        ctx.formValue("Notify the customer") === false
          ? "the customer is not told"
          : `the customer is told: ${textOr(ctx.formValue("Message"), "(no message)")}`;
      return result.success(`Order #${number(order.id)} shipped by ${carrier} (${tracking}); ${told}`);
    },
  });

  orders.addAction("Notify the warehouse", {
    scope: "Single",
    description: "Tells the warehouse's service about the order (the browser calls it)",
    form: [{ label: "Warehouse URL", type: "String", isRequired: true, defaultValue: "http://127.0.0.1:8900/orders" }],
    execute: (ctx, result) => {
      const order = ctx.getRecord(["id", "status"]);
      const url = asText(ctx.formValue("Warehouse URL")) ?? "";
      // The browser makes the call (as Forest's UI does): the warehouse's service must allow this
      // console's origin (CORS).
      return result.webhook(url, "POST", { "Content-Type": "application/json" }, { order: number(order.id), status: order.status ?? null });
    },
  });

  // A record chart that can fail: a cancelled order's items went back to stock, and the chart
  // says so in place of a figure (the console shows the message).
  orders.addChart("items_ordered", (ctx) => {
    const id = recordIdValue(ctx.recordId);
    const order = ctx.context.collection("orders").list({ field: "id", operator: "Equal", value: id }, ["status"], [{ field: "id", ascending: true }], [0, 1]);
    const status = (order.length > 0 ? asText(order.value(0, "status")) : undefined) ?? "";
    if (status === "cancelled") throw new ValidationError("This order is cancelled: its items went back to stock, so none is counted");
    const rows = ctx.context.collection("order_items").aggregate({ field: "order_id", operator: "Equal", value: id }, { operation: "Sum", field: "quantity" });
    return ChartResult.value(asNumber(rows[0]?.value) ?? 0);
  });

  // The customer's email as a read-only field of the order.
  orders.importField("customer_email", { path: "customer:email", readonly: true });
  // A computed field cannot be sorted by the database: sorted in memory.
  orders.emulateFieldSorting("customer_name");

  // Every order of a customer, as a relation declared over the keys.
  ds.collection("customers").addOneToManyRelation("purchases", "orders", { originKey: "customer_id" });

  // ---- products -----------------------------------------------------------------------------
  const products = ds.collection("products");

  products.addField("price_band", {
    columnType: "Enum",
    dependencies: ["price"],
    enumValues: ["budget", "premium"],
    getValues: (rows) =>
      rows.texts("price").map((price) => {
        const value = price === null || price.trim() === "" ? NaN : Number(price);
        return Number.isNaN(value) ? null : value < PREMIUM ? "budget" : "premium";
      }),
  });

  // Filtering and sorting the band go to the price, which the database answers.
  products
    .replaceFieldOperator("price_band", "Equal", (value) => {
      const premium = value === "premium";
      return { field: "price", operator: premium ? "GreaterThan" : "LessThan", value: premium ? PREMIUM - 0.005 : PREMIUM };
    })
    .replaceFieldSorting("price_band", [{ field: "price", ascending: true }])
    .addFieldValidation("price", "GreaterThan", 0)
    .addManyToManyRelation("labels", "tags", "product_tags", { originKey: "product_id", foreignKey: "tag_id" })
    // Products are kept for the order history: deleting one empties its stock.
    .overrideDelete((filter, ctx) => ctx.collection("products").update(filter, { stock: 0 }));

  ds.collection("order_items").disableCount();

  ds.addChart("orders_by_status", (ctx) => {
    const rows = ctx.context.collection("orders").aggregate(null, { operation: "Count", groups: [{ field: "status" }] });
    return ChartResult.distribution(rows.map((r) => [asText(asObject(r.group)?.status) ?? "", asNumber(r.value) ?? 0] as const));
  });
}

// ComponentizeJS binds these two names to the component's exports.
export const { customizer, workflow } = exportPlugin(customize);

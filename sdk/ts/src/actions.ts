/**
 * Actions: {@link Action} (scope, form, execute), form elements written as the Node agent writes
 * them (plain objects: fields, and `Layout` elements — separators, HTML blocks, rows, pages),
 * the {@link ActionContext} handlers receive and the {@link ActionResult} they return.
 *
 * A property given as a function (`value`, `enumValues`, `options`, `if`, an HTML block's
 * `content`) makes the form dynamic: the SDK evaluates it on the form's load, change and search
 * hooks. Every form value a function reads ({@link ActionContext.formValue}) makes the front
 * end send change hooks for that field (`watchChanges`).
 */

import { type Caller, type CollectionRef, type Context, type Json, type JsonObject, type Rows, asObject } from "./data.js";
import { NotFoundError, ValidationError } from "./errors.js";

/** Which records an action targets: exactly one, one or more, or the whole collection. */
export type Scope = "Single" | "Bulk" | "Global";

/** The type of a form field (the spec's list). */
export type FieldType =
  | "String"
  | "Number"
  | "Boolean"
  | "Date"
  | "Dateonly"
  | "Time"
  | "Enum"
  | "EnumList"
  | "File"
  | "FileList"
  | "Json"
  | "Collection"
  | "NumberList"
  | "StringList";

/** A value, or a function of the action's context computing it on each form hook. */
export type Dynamic<T> = T | ((ctx: ActionContext) => T | Promise<T>);

/**
 * A form field. `label` is also its id unless `id` is given; form values are keyed by the id.
 * Any other property of the agent's form element (widget settings such as `min`, `max`,
 * `step`) goes in `properties`.
 */
export interface FieldElement {
  label: string;
  type: FieldType;
  id?: string;
  isRequired?: boolean;
  isReadOnly?: boolean;
  description?: string;
  defaultValue?: Json;
  /** The field's value, computed from the context (the agent's `value` function). */
  value?: (ctx: ActionContext) => Json | Promise<Json>;
  enumValues?: Dynamic<string[]>;
  collectionName?: string;
  widget?: string;
  /** Dropdown options: `[label, value]` pairs, or a function of the context and search text. */
  options?: [string, Json][] | ((ctx: ActionContext, searchText: string | undefined) => [string, Json][] | Promise<[string, Json][]>);
  placeholder?: string;
  search?: string;
  /** Shown only when this answers true (the agent's `if`). */
  if?: (ctx: ActionContext) => boolean | Promise<boolean>;
  properties?: JsonObject;
}

/** A horizontal line between elements. */
export interface SeparatorElement {
  type: "Layout";
  component: "Separator";
  if?: (ctx: ActionContext) => boolean | Promise<boolean>;
}

/** A block of HTML; `content` may be a function of the context. */
export interface HtmlBlockElement {
  type: "Layout";
  component: "HtmlBlock";
  content: Dynamic<string>;
  if?: (ctx: ActionContext) => boolean | Promise<boolean>;
}

/** Fields shown side by side. Only fields belong in a row. */
export interface RowElement {
  type: "Layout";
  component: "Row";
  fields: FieldElement[];
  if?: (ctx: ActionContext) => boolean | Promise<boolean>;
}

/** One page of a multi-page form. A form made of pages holds nothing else at its top level. */
export interface PageElement {
  type: "Layout";
  component: "Page";
  elements: FormElement[];
  nextButtonLabel?: string;
  previousButtonLabel?: string;
  if?: (ctx: ActionContext) => boolean | Promise<boolean>;
}

export type LayoutElement = SeparatorElement | HtmlBlockElement | RowElement | PageElement;
export type FormElement = FieldElement | LayoutElement;

function isLayout(e: FormElement): e is LayoutElement {
  return e.type === "Layout" && "component" in e;
}

function children(e: FormElement): FormElement[] {
  if (!isLayout(e)) return [];
  if (e.component === "Row") return e.fields;
  if (e.component === "Page") return e.elements;
  return [];
}

function isDynamic(e: FormElement): boolean {
  if (e.if !== undefined) return true;
  if (isLayout(e)) {
    if (e.component === "HtmlBlock") return typeof e.content === "function";
    return children(e).some(isDynamic);
  }
  return e.value !== undefined || typeof e.enumValues === "function" || typeof e.options === "function";
}

const options = (pairs: [string, Json][]): Json => pairs.map(([label, value]) => ({ label, value }));

/** A field's static properties in the agent's shape (what is declared at load). */
function fieldStatic(f: FieldElement): JsonObject {
  const o: JsonObject = { id: f.id ?? f.label, label: f.label, type: f.type, isRequired: f.isRequired ?? false, isReadOnly: f.isReadOnly ?? false };
  if (f.description !== undefined) o.description = f.description;
  if (f.defaultValue !== undefined) o.defaultValue = f.defaultValue;
  if (f.collectionName !== undefined) o.collectionName = f.collectionName;
  if (f.widget !== undefined) o.widget = f.widget;
  if (f.placeholder !== undefined) o.placeholder = f.placeholder;
  // Options computed from the search text make the dropdown's search dynamic.
  const search = f.search ?? (typeof f.options === "function" ? "dynamic" : undefined);
  if (search !== undefined) o.search = search;
  if (Array.isArray(f.enumValues)) o.enumValues = [...f.enumValues];
  if (Array.isArray(f.options)) o.options = options(f.options);
  return o;
}

/** A field evaluated for a form hook: its dynamic properties computed and its value filled in. */
async function fieldJson(f: FieldElement, ctx: ActionContext, searchValue?: string): Promise<JsonObject> {
  const o = fieldStatic(f);
  const id = o.id as string;
  if (typeof f.enumValues === "function") o.enumValues = [...(await f.enumValues(ctx))];
  if (typeof f.options === "function") o.options = options(await f.options(ctx, searchValue));
  if (f.value !== undefined) o.value = await f.value(ctx);
  else if (id in ctx.rawFormValues) o.value = ctx.rawFormValues[id];
  else if (f.defaultValue !== undefined) o.value = f.defaultValue;
  return { ...o, ...(f.properties ?? {}) };
}

function layoutJson(e: LayoutElement, inner: Json[]): JsonObject {
  switch (e.component) {
    case "Row":
      return { type: "Layout", component: "Row", fields: inner };
    case "Page": {
      const o: JsonObject = { type: "Layout", component: "Page" };
      if (e.nextButtonLabel !== undefined) o.nextButtonLabel = e.nextButtonLabel;
      if (e.previousButtonLabel !== undefined) o.previousButtonLabel = e.previousButtonLabel;
      o.elements = inner;
      return o;
    }
    default:
      return { type: "Layout", component: e.component };
  }
}

/** The element's static shape (declared at load). */
function staticJson(e: FormElement): JsonObject {
  if (!isLayout(e)) return { ...fieldStatic(e), ...(e.properties ?? {}) };
  if (e.component === "HtmlBlock") {
    return typeof e.content === "function" ? { type: "Layout", component: "HtmlBlock" } : { type: "Layout", component: "HtmlBlock", content: e.content };
  }
  return layoutJson(e, children(e).map(staticJson));
}

async function visible(e: FormElement, ctx: ActionContext): Promise<boolean> {
  // At execute every field stays, so that its value is read.
  if (e.if !== undefined && ctx.hook !== "execute") return Boolean(await e.if(ctx));
  return true;
}

/** The elements shown for this context: hidden ones dropped, and a row or page left empty dropped too. */
async function evaluate(elements: FormElement[], ctx: ActionContext): Promise<JsonObject[]> {
  const out: JsonObject[] = [];
  for (const e of elements) {
    if (!(await visible(e, ctx))) continue;
    if (!isLayout(e)) {
      out.push(await fieldJson(e, ctx));
    } else if (e.component === "Row" || e.component === "Page") {
      const inner = await evaluate(children(e), ctx);
      if (inner.length === 0 && ctx.hook !== "execute") continue;
      out.push(layoutJson(e, inner));
    } else if (e.component === "HtmlBlock") {
      const content = typeof e.content === "function" ? await e.content(ctx) : e.content;
      out.push({ type: "Layout", component: "HtmlBlock", content });
    } else {
      out.push(layoutJson(e, []));
    }
  }
  return out;
}

function findField(elements: FormElement[], wanted: string): FieldElement | undefined {
  for (const e of elements) {
    if (!isLayout(e)) {
      if (wanted === (e.id ?? e.label) || wanted === e.label) return e;
    } else {
      const found = findField(children(e), wanted);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

/** Sets `watchChanges` on every field of an evaluated element (inside rows and pages). */
function markWatched(v: JsonObject, reads: Set<string>): void {
  if (v.type === "Layout") {
    for (const key of ["fields", "elements"]) {
      const inner = v[key];
      if (Array.isArray(inner)) for (const child of inner) if (asObject(child)) markWatched(child as JsonObject, reads);
    }
    return;
  }
  v.watchChanges = typeof v.id === "string" && reads.has(v.id);
}

/** An action's definition: its scope, its execute handler, an optional form and presentation options. */
export interface Action {
  scope: Scope;
  /** Runs the action; `result` is {@link ActionResult}, the agent's result builder. */
  execute: (ctx: ActionContext, result: typeof ActionResult) => ActionResult | Promise<ActionResult>;
  form?: FormElement[];
  description?: string;
  submitButtonLabel?: string;
  generateFile?: boolean;
}

/** The static definition declared at load; throws a {@link ValidationError} on a form the toolkit refuses. */
export function actionDefinition(action: Action): JsonObject {
  const form = action.form ?? [];
  const pages = form.filter((e) => isLayout(e) && e.component === "Page").length;
  if (pages > 0 && pages < form.length) throw new ValidationError("You cannot mix pages and other form elements in an action form");
  const rows = (e: FormElement): RowElement[] =>
    isLayout(e) && e.component === "Row" ? [e] : isLayout(e) && e.component === "Page" ? e.elements.flatMap(rows) : [];
  for (const row of form.flatMap(rows)) {
    if (row.fields.some(isLayout)) throw new ValidationError("A row of an action form holds fields only");
  }
  return {
    scope: action.scope,
    description: action.description ?? null,
    submitButtonLabel: action.submitButtonLabel ?? null,
    generateFile: action.generateFile ?? false,
    form: form.map(staticJson),
    dynamicForm: form.some(isDynamic),
  };
}

/**
 * The evaluated form: `if` applied, dynamic properties computed, values filled in. On the search
 * hook only the searched field is rebuilt (and returned, out of its row or page, as the agent
 * does).
 */
export async function evaluateForm(action: Action, ctx: ActionContext): Promise<JsonObject[]> {
  const form = action.form ?? [];
  let out: JsonObject[];
  if (ctx.searchField !== undefined) {
    const field = findField(form, ctx.searchField);
    out = field !== undefined && (await visible(field, ctx)) ? [await fieldJson(field, ctx, ctx.searchValue)] : [];
  } else {
    out = await evaluate(form, ctx);
  }
  for (const v of out) markWatched(v, ctx.reads);
  return out;
}

/** The toolkit's error when a Single action's selection matches no record. */
const NO_RECORD = "Query with filter did not match any records";

/** What an action's execute handler and its form's functions receive. */
export class ActionContext {
  readonly rawFormValues: JsonObject;
  /** The selection as a condition tree (`null` for a global action). */
  readonly filter: Json;
  readonly primaryKeys: string[];
  readonly changedField: string | undefined;
  readonly searchField: string | undefined;
  readonly searchValue: string | undefined;
  /** `load`, `change`, `search` or `execute`. */
  readonly hook: string | undefined;
  /** Form fields read by the handlers (they are watched for changes). */
  readonly reads = new Set<string>();

  constructor(
    readonly context: Context,
    payload: JsonObject,
  ) {
    const text = (key: string) => (typeof payload[key] === "string" ? (payload[key] as string) : undefined);
    this.rawFormValues = asObject(payload.formValues) ?? {};
    this.filter = payload.filter ?? null;
    const keys = payload.primaryKeys;
    this.primaryKeys = Array.isArray(keys) ? keys.filter((k): k is string => typeof k === "string") : [];
    this.changedField = text("changedField");
    this.searchField = text("searchField");
    this.searchValue = text("searchValue");
    this.hook = text("hook");
  }

  /** The request's caller. */
  get caller(): Caller {
    return this.context.caller;
  }

  /** The action's collection. */
  collection(): CollectionRef {
    return this.context.this();
  }

  /** One form value by field id (`null` when unset). Reading it makes the form watch the field. */
  formValue(id: string): Json {
    this.reads.add(id);
    return this.rawFormValues[id] ?? null;
  }

  /** Every form value by field id (marks them all as watched). */
  get formValues(): JsonObject {
    for (const id of Object.keys(this.rawFormValues)) this.reads.add(id);
    return this.rawFormValues;
  }

  /** Whether the change hook was triggered by this field. */
  hasFieldChanged(id: string): boolean {
    this.reads.add(id);
    return this.changedField === id;
  }

  /** The selected records with these fields (one `list` call). */
  getRecords(fields: readonly string[]): Rows {
    return this.collection().list(this.filter, fields);
  }

  /** Every primary key value of each selected record. */
  getCompositeRecordIds(): Json[][] {
    const rows = this.getRecords(this.primaryKeys);
    return Array.from({ length: rows.length }, (_, i) => this.primaryKeys.map((k) => rows.value(i, k)));
  }

  /** The primary key values of the selected records (the first key of composite keys). */
  getRecordIds(): Json[] {
    return this.getCompositeRecordIds()
      .filter((ids) => ids.length > 0)
      .map((ids) => ids[0]);
  }

  /** The single selected record (Single scope) with these fields. */
  getRecord(fields: readonly string[]): JsonObject {
    const rows = this.getRecords(fields);
    if (rows.length === 0) throw new NotFoundError(NO_RECORD);
    return rows.record(0);
  }

  /** The single selected record's id (Single scope). */
  getRecordId(): Json {
    const ids = this.getRecordIds();
    if (ids.length === 0) throw new NotFoundError(NO_RECORD);
    return ids[0];
  }

  /** The single selected record's composite id (Single scope). */
  getCompositeRecordId(): Json[] {
    const ids = this.getCompositeRecordIds();
    if (ids.length === 0) throw new NotFoundError(NO_RECORD);
    return ids[0];
  }

  /** One field (or relation path) of the single selected record. */
  getField(path: string): Json {
    return this.getRecord([path])[path] ?? null;
  }
}

/**
 * What an action's execute returns (the spec's result builder): build one with
 * {@link ActionResult.success}, `error`, `webhook`, `file` or `redirectTo`, then add response
 * headers with {@link ActionResult.header}.
 */
export class ActionResult {
  readonly headers: Record<string, string> = {};

  private constructor(
    readonly result: JsonObject,
    /** The bytes of a `file` result. */
    readonly fileBytes?: Uint8Array,
  ) {}

  /** 200 `{success: message}`; `invalidated`: relations or collections the front end refreshes. */
  static success(message: string, options: { html?: string; invalidated?: string[] } = {}): ActionResult {
    return new ActionResult({ type: "Success", message, html: options.html ?? null, invalidated: options.invalidated ?? [] });
  }

  /** 400 `{error: message}`: a refusal the person sees (not a failure of the plugin). */
  static error(message: string, options: { html?: string } = {}): ActionResult {
    return new ActionResult({ type: "Error", message, html: options.html ?? null });
  }

  /** 200 `{webhook: {url, method, headers, body}}`: the front end makes the call. */
  static webhook(url: string, method = "POST", headers: JsonObject = {}, body: Json = null): ActionResult {
    return new ActionResult({ type: "Webhook", url, method, headers, body });
  }

  /** A file download (the action must be declared with `generateFile: true`). */
  static file(data: Uint8Array | string, name: string, mimeType: string): ActionResult {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    return new ActionResult({ type: "File", name, mimeType }, bytes);
  }

  /** 200 `{redirectTo: path}`. */
  static redirectTo(path: string): ActionResult {
    return new ActionResult({ type: "Redirect", path });
  }

  /** Adds a response header (the spec's `setHeader`); returns the result. */
  header(name: string, value: string): this {
    this.headers[name] = value;
    return this;
  }

  /** The result as the host reads it. */
  toJson(): JsonObject {
    return { ...this.result, responseHeaders: { ...this.headers } };
  }
}

/**
 * The customizer a plugin writes against: {@link DataSource} and {@link CollectionCustomizer}
 * declare customizations and workflow steps, with the Node agent's method names and shapes
 * (`addField(name, {columnType, dependencies, getValues})`, `addAction(name, {scope, form,
 * execute})`, `addHook("Before", "Create", fn)` ...). Every method returns the customizer, so
 * calls chain.
 *
 * Handler ids are positions in declaration order: `customize` must be deterministic (same schema
 * and options, same declarations), since every fresh instance rebuilds its table by running it
 * again.
 *
 * The type parameter `S` is the schema `canopy typings --lang ts` writes (the agent's
 * `typings.d.ts` shape): with it, collection and field names are checked by the compiler.
 */

import { type Action, actionDefinition } from "./actions.js";
import type { BinaryMode, ChartContext, ChartResult, HookContext, Operation, Position, StepContext, StepOutput, WriteContext } from "./contexts.js";
import { Column, type Context, type Json, type JsonObject, type Rows, Texts, log } from "./data.js";
import { type Exports, exportStatic } from "./exports.js";
import { environment } from "./wit.js";

/** The schema a plugin is typed against (`canopy typings --lang ts` writes one). */
export type TSchema = Record<string, { plain: Record<string, unknown>; nested: Record<string, unknown>; flat: Record<string, unknown> }>;
/** A collection name of the schema. */
export type TCollectionName<S extends TSchema> = Extract<keyof S, string>;
/** A column of the collection, or a `relation:field` path through its to-one relations. */
export type TFieldName<S extends TSchema, N extends TCollectionName<S>> = Extract<keyof S[N]["plain"] | keyof S[N]["flat"], string>;

/** The primitive column types of a computed field; a composite type is given as its JSON form (`["String"]`, `{street: "String"}`). */
export type ColumnType = "String" | "Number" | "Boolean" | "Date" | "Dateonly" | "Time" | "Enum" | "Json" | "Uuid" | "Point" | "File" | Json[] | JsonObject;

/** What a computed field answers: a column, packed texts, or one value per row. */
export type ComputedValues = Column | Texts | readonly unknown[];

/**
 * A computed field: its type, its dependencies (columns or relation paths such as
 * `customer:first_name`, possibly other computed fields) and the batch function.
 *
 * `getValues(rows, ctx)` receives the de-duplicated dependency rows of one request and returns
 * one value per row, in order: a {@link Column}, a {@link Texts}, or an array converted by the
 * column type (strings for text types, numbers for `Number` — a string cell makes it an exact
 * decimal text column —, booleans, and JSON values for `Json`, `Point` and composite types).
 */
export interface ComputedField<D extends string = string> {
  columnType: ColumnType;
  dependencies: readonly D[];
  getValues: (rows: Rows, ctx: Context) => ComputedValues | Promise<ComputedValues>;
  defaultValue?: Json;
  enumValues?: string[];
}

/** How an array answered by a computed field of this type crosses. */
function toColumn(type: ColumnType, answer: ComputedValues): Column {
  if (answer instanceof Column) return answer;
  const json = type === "Json" || type === "Point" || typeof type !== "string";
  if (answer instanceof Texts) return new Column(json ? "json" : "strings", answer);
  const cells = answer as readonly unknown[];
  if (type === "Number") {
    let text = false;
    for (let i = 0; i < cells.length && !text; i++) text = typeof cells[i] === "string";
    return text ? Column.strings(cells as string[]) : Column.numbers(cells as (number | null)[]);
  }
  if (type === "Boolean") return Column.booleans(cells as (boolean | null)[]);
  if (json) return Column.json(cells);
  return Column.strings(cells as string[]);
}

/** One entry of the handler table: what kind of call it answers and the function. */
export interface Handler {
  kind: "none" | "field" | "action" | "hook" | "segment" | "search" | "chart" | "write" | "operator" | "create" | "update" | "delete" | "step";
  // Each kind's function has its own signature; the exports call it by kind.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  fn?: any;
  position?: Position;
  operation?: Operation;
}

/** One declared customization, as `customizer.declare` answers it. */
export interface Declaration {
  collection: string | undefined;
  kind: string;
  name: string;
  definition: Json;
  handler: number;
}

type Awaitable<T> = T | Promise<T>;
export type SegmentFn = (ctx: Context) => Awaitable<Json>;
export type SearchFn = (text: string, extended: boolean, ctx: Context) => Awaitable<Json | undefined>;
export type HookFn = (ctx: HookContext) => Awaitable<void>;
export type ChartFn = (ctx: ChartContext) => Awaitable<ChartResult | Json>;
export type WriteFn = (value: Json, ctx: WriteContext) => Awaitable<JsonObject | null | undefined>;
export type OperatorFn = (value: Json, ctx: Context) => Awaitable<Json>;
export type CreateFn = (data: JsonObject[], ctx: Context) => Awaitable<JsonObject[]>;
export type UpdateFn = (filter: Json, patch: JsonObject, ctx: Context) => Awaitable<void>;
export type DeleteFn = (filter: Json, ctx: Context) => Awaitable<void>;
export type StepFn = (step: StepContext) => Awaitable<StepOutput | null | undefined>;
export type ListRecordsFn = (record: JsonObject, ctx: Context) => Awaitable<JsonObject[]>;

/**
 * The datasource being customized: the schema, options and scope, the collection customizers,
 * datasource charts, plugins applied on top, and workflow steps.
 */
export class DataSource<S extends TSchema = TSchema> {
  readonly declarations: Declaration[] = [];
  readonly handlers: Handler[] = [];
  readonly steps: [string, number][] = [];
  #schema: JsonObject | undefined;
  #options: JsonObject | undefined;
  #scope: { value: string | undefined } | undefined;

  constructor(schema?: Json, options?: Json) {
    this.setEnvironment(schema, options);
  }

  /** Sets the schema and options (what `declare` receives), instead of fetching them. */
  setEnvironment(schema?: Json, options?: Json): void {
    this.#schema = schema === undefined ? undefined : (schema as JsonObject);
    this.#options = options === undefined ? undefined : (options as JsonObject);
  }

  /** The datasource schema: `{collections: [{name, fields: [{name, type, ...}]}]}`, fetched from the host on first use. */
  get schema(): JsonObject {
    this.#schema ??= JSON.parse(environment.schema()) as JsonObject;
    return this.#schema ?? {};
  }

  /** The plugin's options (the `[options]` table of its `.toml`, or those of the `use` that applied it); `{}` when none. */
  get options(): JsonObject {
    if (this.#options === undefined) {
      try {
        this.#options = JSON.parse(environment.options()) as JsonObject;
      } catch {
        this.#options = {};
      }
    }
    return this.#options !== null && typeof this.#options === "object" ? this.#options : {};
  }

  /** The collection this application of the plugin is scoped to, `undefined` when it is applied to the whole datasource. */
  get scope(): string | undefined {
    this.#scope ??= { value: environment.scope() };
    return this.#scope.value;
  }

  /** The names of the datasource's collections. */
  collectionNames(): string[] {
    const collections = this.schema.collections;
    return Array.isArray(collections) ? collections.flatMap((c) => (typeof (c as JsonObject).name === "string" ? [(c as JsonObject).name as string] : [])) : [];
  }

  /** A customizer for one collection. */
  collection<N extends TCollectionName<S>>(name: N): CollectionCustomizer<S, N> {
    return new CollectionCustomizer(this, name);
  }

  /** Runs `f` on the customizer of one collection (the agent's `customizeCollection`). */
  customizeCollection<N extends TCollectionName<S>>(name: N, f: (c: CollectionCustomizer<S, N>) => void): this {
    f(this.collection(name));
    return this;
  }

  /** Records one customization and its handler (low level: prefer the typed methods). */
  declare(collection: string | undefined, kind: string, name: string, definition: Json, handler?: Handler): void {
    this.declarations.push({ collection, kind, name, definition, handler: this.handlers.length });
    this.handlers.push(handler ?? { kind: "none" });
  }

  /** A datasource (dashboard) chart. */
  addChart(name: string, f: ChartFn): this {
    this.declare(undefined, "chart", name, {}, { kind: "chart", fn: f });
    return this;
  }

  /** Hides a collection from the exposed schema (with every relation pointing to it); customizations and handlers still use it. */
  removeCollection(name: TCollectionName<S>): this {
    this.declare(name, "remove-collection", "", {});
    return this;
  }

  /** Applies another plugin of the plugin directory (by its file stem) to the whole datasource with `options`, right after this one. */
  use(name: string, options: JsonObject = {}): this {
    this.declare(undefined, "use", name, { options });
    return this;
  }

  /**
   * A workflow-step handler: a workflow's `plugin` step names it by this plugin's name and
   * `name`; `f(step)` decides (`StepOutput.choose`) or computes (`StepOutput.next().value(..)`),
   * or both. Names are unique within a plugin.
   */
  addWorkflowStep(name: string, f: StepFn): this {
    this.steps.push([name, this.handlers.length]);
    this.handlers.push({ kind: "step", fn: f });
    return this;
  }
}

/** Declares customizations on one collection; every method chains. */
export class CollectionCustomizer<S extends TSchema = TSchema, N extends TCollectionName<S> = TCollectionName<S>> {
  constructor(
    readonly dataSource: DataSource<S>,
    readonly name: N,
  ) {}

  #declare(kind: string, name: string, definition: Json, handler?: Handler): this {
    this.dataSource.declare(this.name, kind, name, definition, handler);
    return this;
  }

  // ---- computed fields ----------------------------------------------------------------------

  /** Adds a computed field. */
  addField(name: string, field: ComputedField<TFieldName<S, N>>): this {
    const definition = {
      columnType: field.columnType,
      dependencies: [...field.dependencies],
      defaultValue: field.defaultValue ?? null,
      enumValues: field.enumValues ?? null,
    };
    const compute = (rows: Rows, ctx: Context): Column | Promise<Column> => {
      const values = field.getValues(rows, ctx);
      return values instanceof Promise ? values.then((v) => toColumn(field.columnType, v)) : toColumn(field.columnType, values);
    };
    return this.#declare("field", name, definition, { kind: "field", fn: compute });
  }

  // ---- actions ------------------------------------------------------------------------------

  /**
   * Adds an action. A definition the toolkit refuses (pages mixed with other elements, a row
   * holding a layout element) is logged and skipped, as in the Rust SDK; declared at import
   * (a {@link Plugin}), it fails the build instead.
   */
  addAction(name: string, action: Action): this {
    let definition: JsonObject;
    try {
      definition = actionDefinition(action);
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      if (this.dataSource instanceof Plugin) throw new Error(`action \`${name}\`: ${message}`);
      log("error", `action \`${name}\` skipped: ${message}`);
      return this;
    }
    return this.#declare("action", name, definition, { kind: "action", fn: action });
  }

  // ---- hooks, segments, search, charts ------------------------------------------------------

  /** Adds a hook; hooks of one position and operation run in declaration order. */
  addHook(position: Position, operation: Operation, f: HookFn): this {
    return this.#declare("hook", `${position} ${operation}`, { position, type: operation }, { kind: "hook", fn: f, position, operation });
  }

  /** Adds a segment: a condition tree (static), or a function of the context returning one on each request (dynamic). */
  addSegment(name: string, segment: Json | SegmentFn): this {
    if (typeof segment === "function") return this.#declare("segment", name, {}, { kind: "segment", fn: segment });
    return this.#declare("segment", name, { tree: segment });
  }

  /**
   * Replaces the collection's search: by `f(text, extended, ctx)`, which returns a condition
   * tree (`undefined`: no condition), or by a field selection (`only`, `include`, `exclude`;
   * relation paths with `:`).
   */
  replaceSearch(search: SearchFn | { only?: TFieldName<S, N>[]; include?: TFieldName<S, N>[]; exclude?: TFieldName<S, N>[] }): this {
    if (typeof search === "function") return this.#declare("search", "", { handler: true }, { kind: "search", fn: search });
    return this.#declare("search", "", { onlyFields: search.only ?? null, includeFields: search.include ?? [], excludeFields: search.exclude ?? [] });
  }

  /** Turns search off on the collection (searching answers 400). */
  disableSearch(): this {
    return this.#declare("disable-search", "", {});
  }

  /** Adds a record chart on the collection. */
  addChart(name: string, f: ChartFn): this {
    return this.#declare("chart", name, {}, { kind: "chart", fn: f });
  }

  // ---- relations ----------------------------------------------------------------------------

  /** A many-to-one relation through `foreignKey`, a column of this collection (pointing to `foreignKeyTarget`, by default the foreign primary key). */
  addManyToOneRelation(name: string, foreignCollection: TCollectionName<S>, options: { foreignKey: TFieldName<S, N>; foreignKeyTarget?: string }): this {
    return this.#declare("relation", name, { type: "ManyToOne", foreignCollection, foreignKey: options.foreignKey, foreignKeyTarget: options.foreignKeyTarget ?? null });
  }

  /** A one-to-many relation: `originKey`, a column of the foreign collection, points to this collection (to `originKeyTarget`, by default its primary key). */
  addOneToManyRelation(name: string, foreignCollection: TCollectionName<S>, options: { originKey: string; originKeyTarget?: string }): this {
    return this.#declare("relation", name, { type: "OneToMany", foreignCollection, originKey: options.originKey, originKeyTarget: options.originKeyTarget ?? null });
  }

  /** A one-to-one relation: as a one-to-many one, one record at most. */
  addOneToOneRelation(name: string, foreignCollection: TCollectionName<S>, options: { originKey: string; originKeyTarget?: string }): this {
    return this.#declare("relation", name, { type: "OneToOne", foreignCollection, originKey: options.originKey, originKeyTarget: options.originKeyTarget ?? null });
  }

  /** A many-to-many relation through `throughCollection`, whose `originKey` points to this collection and `foreignKey` to the foreign one. */
  addManyToManyRelation(
    name: string,
    foreignCollection: TCollectionName<S>,
    throughCollection: TCollectionName<S>,
    options: { originKey: string; foreignKey: string; originKeyTarget?: string; foreignKeyTarget?: string },
  ): this {
    return this.#declare("relation", name, {
      type: "ManyToMany",
      foreignCollection,
      throughCollection,
      originKey: options.originKey,
      foreignKey: options.foreignKey,
      originKeyTarget: options.originKeyTarget ?? null,
      foreignKeyTarget: options.foreignKeyTarget ?? null,
    });
  }

  /**
   * Related data listed by the plugin (the agent's `addExternalRelation`): a computed field of
   * type `[schema]` whose value for each record is `listRecords(record, ctx)`. Its dependencies
   * default to the collection's primary keys, read from the schema.
   */
  addExternalRelation(name: string, relation: { schema: JsonObject; listRecords: ListRecordsFn; dependencies?: TFieldName<S, N>[] }): this {
    if (relation.dependencies === undefined && this.dataSource instanceof Plugin) {
      throw new Error(`external relation \`${name}\`: a Plugin declared at import cannot read the schema: give its dependencies`);
    }
    const dependencies = (relation.dependencies ?? this.#primaryKeys()) as TFieldName<S, N>[];
    return this.addField(name, {
      columnType: [relation.schema],
      dependencies,
      getValues: async (rows, ctx) => Column.json(await Promise.all(rows.records().map((r) => relation.listRecords(r, ctx)))),
    });
  }

  #primaryKeys(): string[] {
    const collections = (this.dataSource.schema.collections ?? []) as { name?: string; fields?: { name?: string; isPrimaryKey?: boolean }[] }[];
    return collections.filter((c) => c.name === this.name).flatMap((c) => (c.fields ?? []).filter((f) => f.isPrimaryKey === true && f.name !== undefined).map((f) => f.name as string));
  }

  // ---- fields -------------------------------------------------------------------------------

  /** Adds field `name`, the column at the `:` path through to-one relations (`customer:address:city`); `readonly` unset follows the source field. */
  importField(name: string, options: { path: TFieldName<S, N>; readonly?: boolean }): this {
    return this.#declare("import-field", name, { path: options.path, readonly: options.readonly ?? null });
  }

  /** Exposes field `current` as `newName`; customizations keep using `current`. */
  renameField(current: TFieldName<S, N>, newName: string): this {
    return this.#declare("rename-field", current, { newName });
  }

  /** Hides fields from the exposed schema; customizations and handlers still use them. */
  removeField(...names: TFieldName<S, N>[]): this {
    for (const name of names) this.#declare("remove-field", name, {});
    return this;
  }

  /** A validation rule on a writable column, checked on create and update (`Present`, `LongerThan`, `GreaterThan`, `Match` ...). */
  addFieldValidation(field: TFieldName<S, N>, operator: string, value: Json = null): this {
    return this.#declare("field-validation", field, { operator, value });
  }

  /** Marks a field optional (drops its `Present` rule). */
  setFieldNullable(field: TFieldName<S, N>): this {
    return this.#declare("field-nullable", field, {});
  }

  /**
   * Replaces how `field` is written: `f(value, ctx)` returns the patch that replaces
   * `{[field]: value}`, or `null` to write nothing for it. Also makes the field writable (e.g. a
   * computed field).
   */
  replaceFieldWriting(field: string, f: WriteFn): this {
    return this.#declare("field-writing", field, {}, { kind: "write", fn: f });
  }

  /** How a binary column crosses the wire: `datauri` or `hex`. */
  replaceFieldBinaryMode(field: TFieldName<S, N>, mode: BinaryMode): this {
    return this.#declare("binary-mode", field, { mode });
  }

  // ---- sorting and filtering ----------------------------------------------------------------

  /** Sorts on `field` in memory (for fields the datasource cannot sort). */
  emulateFieldSorting(field: string): this {
    return this.#declare("sorting", field, { mode: "emulate" });
  }

  /** Sorting on `field` sorts by `equivalentSort` (`[{field: "last_name", ascending: true}]`) instead. */
  replaceFieldSorting(field: string, equivalentSort: { field: TFieldName<S, N>; ascending: boolean }[]): this {
    return this.#declare("sorting", field, { mode: "replace", equivalentSort });
  }

  /** Marks `field` not sortable. */
  disableFieldSorting(field: string): this {
    return this.#declare("sorting", field, { mode: "disable" });
  }

  /** Answers in memory every operator of `field`'s type the datasource does not. */
  emulateFieldFiltering(field: string): this {
    return this.#declare("filtering", field, { mode: "emulateAll" });
  }

  /** Answers one operator of `field` in memory. */
  emulateFieldOperator(field: string, operator: string): this {
    return this.#declare("filtering", field, { mode: "emulate", operator });
  }

  /** Rewrites the leaf `field operator value` into the condition tree `f(value, ctx)` returns (in this collection's field names). */
  replaceFieldOperator(field: string, operator: string, f: OperatorFn): this {
    return this.#declare("filtering", field, { mode: "replace", operator }, { kind: "operator", fn: f });
  }

  // ---- overrides, count, plugins ------------------------------------------------------------

  /** Replaces record creation: `f(data, ctx)` returns the created records, each with its primary key. */
  overrideCreate(f: CreateFn): this {
    return this.#declare("override", "create", { operation: "create" }, { kind: "create", fn: f });
  }

  /** Replaces updates: `f(filter, patch, ctx)` updates the records matching `filter`. */
  overrideUpdate(f: UpdateFn): this {
    return this.#declare("override", "update", { operation: "update" }, { kind: "update", fn: f });
  }

  /** Replaces deletes: `f(filter, ctx)` deletes the records matching `filter`. */
  overrideDelete(f: DeleteFn): this {
    return this.#declare("override", "delete", { operation: "delete" }, { kind: "delete", fn: f });
  }

  /** Removes the count from list pagination (the count route answers `deactivated`). */
  disableCount(): this {
    return this.#declare("disable-count", "", {});
  }

  /** Applies another plugin of the directory to this collection with `options`. */
  use(name: string, options: JsonObject = {}): this {
    return this.#declare("use", name, { options });
  }
}

/**
 * A plugin declared at import, at the module's top level, instead of in a `customize` function:
 *
 *     const plugin = new Plugin();
 *     plugin.collection("customers").addField("full_name", {...});
 *     export const { customizer, workflow } = plugin.export();
 *
 * ComponentizeJS evaluates the module at build time and snapshots the engine, so the handler
 * table is in the component: a fresh instance (every action, hook, write, override and workflow
 * step gets one) answers without running a `customize` first. The price: nothing may be read
 * from the host while declaring — `plugin.options`, `plugin.schema` and `plugin.scope` work only
 * inside handlers, and `addExternalRelation` needs its `dependencies`.
 */
export class Plugin<S extends TSchema = TSchema> extends DataSource<S> {
  /** Makes this the component's plugin; export the result from the plugin's module: `export const { customizer, workflow } = plugin.export();`. */
  export(): Exports {
    return exportStatic(this as unknown as DataSource);
  }
}

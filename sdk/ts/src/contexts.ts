/**
 * What the other handlers receive and answer: hooks ({@link HookContext}), charts
 * ({@link ChartContext}, {@link ChartResult}), write replacements ({@link WriteContext}) and
 * workflow steps ({@link StepContext}, {@link StepOutput}).
 */

import { type Caller, type CollectionRef, type Context, type Json, type JsonObject, asObject } from "./data.js";
import { InternalError, NotFoundError, ValidationError } from "./errors.js";
import { environment } from "./wit.js";

// ---------------------------------------------------------------------------------------------
// Hooks
// ---------------------------------------------------------------------------------------------

/** Before or after the operation. */
export type Position = "Before" | "After";

/** The operation a hook wraps. */
export type Operation = "List" | "Create" | "Update" | "Delete" | "Aggregate";

/**
 * The operation's context as the agent's JSON. A Before Create hook may change {@link data} in
 * place and a Before Update hook {@link patch}; throw a `ValidationError` (or another
 * `CanopyError`) to stop the operation with that message.
 */
export class HookContext {
  constructor(
    readonly context: Context,
    readonly position: Position,
    readonly operation: Operation,
    readonly payload: JsonObject,
  ) {}

  /** The request's caller. */
  get caller(): Caller {
    return this.context.caller;
  }

  /**
   * A context property (`filter`, `projection`, `records`, `data`, `patch`, `aggregation`,
   * `limit`, `aggregateResult`); `null` when the operation has none.
   */
  get(key: string): Json {
    return this.payload[key] ?? null;
  }

  /** The records to create (Before/After Create), editable in place; `[]` otherwise. */
  get data(): JsonObject[] {
    const data = this.payload.data;
    return Array.isArray(data) ? (data as JsonObject[]) : [];
  }

  /** The patch of an update (Before/After Update), editable in place; `{}` otherwise. */
  get patch(): JsonObject {
    const patch = asObject(this.payload.patch);
    if (patch === undefined) return (this.payload.patch = {}) as JsonObject;
    return patch;
  }

  /** What a Before Create/Update hook hands back: the (possibly changed) data or patch. */
  change(): Json | undefined {
    if (this.position !== "Before") return undefined;
    if (this.operation === "Create") return this.payload.data ?? null;
    if (this.operation === "Update") return this.payload.patch ?? null;
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Charts
// ---------------------------------------------------------------------------------------------

/** The period of a time-based chart. */
export type TimeRange = "Day" | "Week" | "Month" | "Quarter" | "Year";

/**
 * What a chart handler receives: the caller (their `timezone` is the chart's), the record of a
 * collection chart and the chart's query parameters.
 */
export class ChartContext {
  /** The record's packed id for a collection chart (`"1"`, `"1|2"`), else `null`. */
  readonly recordId: Json;
  readonly recordFilter: Json;
  /** The chart's query parameters. */
  readonly parameters: Json;

  constructor(
    readonly context: Context,
    payload: JsonObject,
  ) {
    this.recordId = payload.recordId ?? null;
    this.recordFilter = payload.recordFilter ?? null;
    this.parameters = payload.parameters ?? null;
  }

  /** The request's caller. */
  get caller(): Caller {
    return this.context.caller;
  }

  /** The record of a collection chart with these fields. */
  getRecord(fields: readonly string[]): JsonObject {
    if (this.recordId === null) throw new InternalError("a datasource chart has no record");
    const rows = this.context.this().list(this.recordFilter, fields);
    if (rows.length === 0) throw new NotFoundError("Record does not exist");
    return rows.record(0);
  }
}

/** Label → number, as an object, a `Map` or `[label, number]` pairs. */
export type Entries = Record<string, number> | Map<string, number> | Iterable<readonly [string, number]>;

function entries(e: Entries): Json[] {
  const pairs: Iterable<readonly [string, number]> = e instanceof Map || Symbol.iterator in e ? (e as Iterable<readonly [string, number]>) : Object.entries(e);
  return Array.from(pairs, ([key, value]) => ({ key: String(key), value }));
}

/** A chart's result; build it with one of the static methods (the spec's eight). */
export class ChartResult {
  private constructor(readonly data: JsonObject) {}

  /** A single value, with the previous period's for comparison. */
  static value(value: number, previous?: number): ChartResult {
    return new ChartResult({ type: "Value", value, previousValue: previous ?? null });
  }

  /** A distribution (pie): label → number. */
  static distribution(e: Entries): ChartResult {
    return new ChartResult({ type: "Distribution", entries: entries(e) });
  }

  /** Points of one line: `[ISO date, value]`; missing periods are filled with 0. */
  static timeBased(range: TimeRange, points: Iterable<readonly [string, number | null]>): ChartResult {
    return new ChartResult({ type: "TimeBased", range, points: Array.from(points, ([date, value]) => ({ date, value })) });
  }

  /** Several lines over the same ISO dates: `[label, values]`, one value per date. */
  static multipleTimeBased(range: TimeRange, dates: readonly string[], lines: Iterable<readonly [string, (number | null)[]]>): ChartResult {
    return new ChartResult({ type: "MultipleTimeBased", range, dates: [...dates], lines: Array.from(lines, ([label, values]) => ({ label, values })) });
  }

  /** A percentage. */
  static percentage(value: number): ChartResult {
    return new ChartResult({ type: "Percentage", value });
  }

  /** A value against an objective. */
  static objective(value: number, objective: number): ChartResult {
    return new ChartResult({ type: "Objective", value, objective });
  }

  /** A leaderboard: label → number, sorted descending by the host. */
  static leaderboard(e: Entries): ChartResult {
    return new ChartResult({ type: "Leaderboard", entries: entries(e) });
  }

  /** Free-form data, returned as is. */
  static smart(data: Json): ChartResult {
    return new ChartResult({ type: "Smart", data });
  }

  /** The result as the host reads it. */
  toJson(): JsonObject {
    return this.data;
  }
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

/** How a binary column crosses the wire: `datauri` (file uploads) or lowercase `hex` (keys). */
export type BinaryMode = "datauri" | "hex";

/** What a write replacement knows besides the written value. */
export class WriteContext {
  /** Create or update. */
  readonly action: "create" | "update";
  /** The whole record being created, or the whole patch of an update. */
  readonly record: JsonObject;
  /** The filter of the updated records (`null` on create). */
  readonly filter: Json;

  constructor(
    readonly context: Context,
    payload: JsonObject,
  ) {
    this.action = payload.action === "update" ? "update" : "create";
    this.record = asObject(payload.record) ?? {};
    this.filter = payload.filter ?? null;
  }

  /** The request's caller. */
  get caller(): Caller {
    return this.context.caller;
  }
}

// ---------------------------------------------------------------------------------------------
// Workflow steps
// ---------------------------------------------------------------------------------------------

/**
 * What a workflow step handler receives: the run's user and collection, the run's record (by its
 * packed id), the run's context and the step's settings.
 */
export class StepContext {
  constructor(
    readonly context: Context,
    /** The run's record, by its packed id (`"42"`; composite keys joined with `|`). */
    readonly recordId: string,
    /** The run's context so far: each earlier step's values under its key. */
    readonly runContext: Json,
    /** The step's `settings` from the workflow definition (`null` when it has none). */
    readonly settings: Json,
  ) {}

  /** The run's user: data calls run with their permissions. */
  get caller(): Caller {
    return this.context.caller;
  }

  /** The workflow's collection. */
  collection(): CollectionRef {
    return this.context.this();
  }

  /** One setting (`null` when absent). */
  setting(key: string): Json {
    return asObject(this.settings)?.[key] ?? null;
  }

  /**
   * A condition tree matching the run's record: each primary key of the collection (from the
   * schema, in order) equal to its part of the packed id.
   */
  recordFilter(): Json {
    const name = this.collection().name;
    const schema = JSON.parse(environment.schema()) as { collections?: { name?: string; fields?: { name?: string; isPrimaryKey?: boolean }[] }[] };
    const keys = (schema.collections ?? []).filter((c) => c.name === name).flatMap((c) => (c.fields ?? []).filter((f) => f.isPrimaryKey === true).map((f) => f.name ?? ""));
    const parts = this.recordId.split("|");
    if (keys.length === 0 || keys.length !== parts.length) throw new ValidationError(`the record id \`${this.recordId}\` does not fit the primary key of \`${name}\``);
    // Ids cross as the text the routes serve; the host reads numbers given as text exactly.
    const conditions = keys.map((field, i) => ({ field, operator: "Equal", value: parts[i] }));
    return conditions.length === 1 ? conditions[0] : { aggregator: "And", conditions };
  }

  /** The run's record with these fields; a `NotFoundError` when it does not exist or the run's user cannot see it. */
  getRecord(fields: readonly string[]): JsonObject {
    const rows = this.collection().list(this.recordFilter(), fields);
    if (rows.length === 0) throw new NotFoundError(`record \`${this.recordId}\` of \`${this.context.collectionName ?? ""}\` not found`);
    return rows.record(0);
  }
}

/**
 * A step's answer: the option chosen (the key of the step the run goes to next; none follows the
 * step's `next`) and values kept in the run's context under the step's key.
 */
export class StepOutput {
  readonly values: JsonObject = {};

  private constructor(readonly option?: string) {}

  /** No option and no values: the run goes on to the step's `next`. */
  static next(): StepOutput {
    return new StepOutput();
  }

  /** Chooses `option`: the run goes to the step with that key. */
  static choose(option: string): StepOutput {
    return new StepOutput(option);
  }

  /** Adds one value to keep in the run's context; returns the output. */
  value(key: string, value: Json): this {
    this.values[key] = value;
    return this;
  }
}

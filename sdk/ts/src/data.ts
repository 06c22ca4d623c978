/**
 * Data crossing the boundary: packed {@link Texts}, typed {@link Column}s, columnar {@link Rows},
 * the {@link Caller}, the handler {@link Context} and {@link CollectionRef} for reading and
 * writing through the host.
 *
 * Values are plain JSON values. Numbers cross as 64-bit floats, which is what a JavaScript
 * number is, so an id read from a row goes back in a filter as the number it was. Values the
 * agent serves as text (PostgreSQL/MySQL bigints and decimals, binary keys as hex, other bytes
 * as data URIs) cross as that text, exactly: give them back as they are.
 */

import { CanopyError, InternalError, fromHost } from "./errors.js";
import { collections, logging, type Batch, type CallContext, type PackedBatch, type PackedColumn, type PackedTexts, type WitCaller, type WitColumn } from "./wit.js";

/** A JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A record as JSON: field name (or relation path) → value. */
export type JsonObject = { [key: string]: Json };

/** Compact JSON text (what crosses the boundary); `undefined` becomes `null`. */
export function dumps(value: unknown): string {
  return JSON.stringify(value === undefined ? null : value);
}

/** The value as a number when it is a JSON number (`undefined` for text, booleans and null). */
export function asNumber(value: unknown): number | undefined {
  return typeof value === "number" ? value : undefined;
}

/** The value when it is a JSON string, else `undefined`. */
export function asText(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/** The value when it is a JSON object (not an array), else `undefined`. */
export function asObject(value: unknown): JsonObject | undefined {
  return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as JsonObject) : undefined;
}

// ---------------------------------------------------------------------------------------------
// Packed text cells
// ---------------------------------------------------------------------------------------------

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

// Whether a text is ASCII is read from lengths, never tested character by character: the
// engine's regular expressions run in an interpreter (a test on 1 KB took ~100 µs). A text is
// ASCII exactly when its UTF-8 length equals its UTF-16 length (any other character takes more
// bytes than code units).

/**
 * Text cells packed as `canopy:plugin@0.3.0`'s `packed.texts`: all the cells' UTF-8 in one
 * `text`, the byte offset where each cell ends in `ends` and the null rows in `nulls`.
 *
 * A computed field's text dependencies arrive in this form, and a text answer goes back in it
 * (three allocations on each side whatever the number of rows, instead of one per cell). Read it
 * with {@link Texts.cells} or by iterating; it is unpacked into strings once, on first read.
 * Build one with {@link Texts.of}, or return an array of strings from a computed field.
 */
export class Texts implements Iterable<string | null> {
  #cells: (string | null)[] | undefined;

  constructor(
    readonly text: string = "",
    readonly ends: Uint32Array = new Uint32Array(0),
    readonly nulls: Uint32Array = new Uint32Array(0),
  ) {}

  /** Packs cells (`null` or `undefined`: a null cell). */
  static of(cells: readonly (string | null | undefined)[]): Texts {
    // Each step per cell is a loop iteration of the engine's interpreter: a native join and one
    // native encoding of the whole text (is it ASCII?), then one pass for the offsets (a
    // non-ASCII text measures its cells in bytes).
    // `join` writes null and undefined cells as nothing.
    const text = cells.join("");
    const ascii = encoder.encode(text).length === text.length;
    const ends = new Uint32Array(cells.length);
    const nulls: number[] = [];
    let position = 0;
    for (let row = 0; row < cells.length; row++) {
      const cell = cells[row];
      if (cell === null || cell === undefined) nulls.push(row);
      else position += ascii ? cell.length : encoder.encode(cell).length;
      ends[row] = position;
    }
    return new Texts(text, ends, new Uint32Array(nulls));
  }

  /** A packed column received from the host. */
  static fromWit(t: PackedTexts): Texts {
    return new Texts(t.text, t.ends, t.nulls);
  }

  /** The number of cells. */
  get length(): number {
    return this.ends.length;
  }

  /** The cells as strings, `null` for null cells (unpacked once, then kept). */
  cells(): (string | null)[] {
    if (this.#cells === undefined) this.#cells = this.#unpack();
    return this.#cells;
  }

  /** One cell. */
  at(row: number): string | null {
    return this.cells()[row] ?? null;
  }

  [Symbol.iterator](): Iterator<string | null> {
    return this.cells()[Symbol.iterator]();
  }

  #unpack(): (string | null)[] {
    const { text, ends } = this;
    const out: (string | null)[] = new Array(ends.length);
    let start = 0;
    if (text.length === (ends.length === 0 ? 0 : ends[ends.length - 1])) {
      // Byte offsets are character offsets: slice the string itself.
      for (let i = 0; i < ends.length; i++) {
        out[i] = text.slice(start, ends[i]);
        start = ends[i];
      }
    } else {
      const bytes = encoder.encode(text);
      for (let i = 0; i < ends.length; i++) {
        try {
          out[i] = decoder.decode(bytes.subarray(start, ends[i]));
        } catch {
          out[i] = null; // an offset that splits a character reads as null
        }
        start = ends[i];
      }
    }
    const nulls = this.nulls;
    for (let i = 0; i < nulls.length; i++) if (nulls[i] < out.length) out[nulls[i]] = null;
    return out;
  }

  /** The WIT `packed.texts` record. */
  toWit(): PackedTexts {
    return { text: this.text, ends: this.ends, nulls: this.nulls };
  }
}

// ---------------------------------------------------------------------------------------------
// Columns and rows
// ---------------------------------------------------------------------------------------------

/** The four cases of a column. */
export type ColumnKind = "numbers" | "strings" | "booleans" | "json";

type Cell = number | string | boolean | null;

// The engine runs in an interpreter, where a builtin written in JavaScript (`Array.from`, `map`,
// iterators, `for…of`) costs far more per element than an indexed loop: the hot paths below use
// indexed loops.

/** `cells` as an array of cells, `null` for nulls, each converted by `convert`. */
function collect<T>(cells: Iterable<T | null | undefined>, convert: (c: T) => Cell): Cell[] {
  const input = Array.isArray(cells) ? (cells as (T | null | undefined)[]) : Array.from(cells);
  const out: Cell[] = new Array(input.length);
  for (let i = 0; i < input.length; i++) {
    const c = input[i];
    out[i] = c === null || c === undefined ? null : convert(c);
  }
  return out;
}

/** An integral number as JavaScript's `String(n)` writes it (`5`, not `5.0`). */
export function jsNumber(n: number): string {
  return String(n);
}

/**
 * One column of values, one cell per row (`null` is null): numbers, strings (also dates, times,
 * uuids, enums, exact numbers as text), booleans, or JSON text.
 *
 * Build one with {@link Column.numbers}, {@link Column.strings}, {@link Column.booleans} or
 * {@link Column.json}; a computed field may also return a plain array, converted by its type.
 */
export class Column {
  constructor(
    readonly kind: ColumnKind,
    private readonly data: readonly Cell[] | Texts,
  ) {}

  /** A number column. */
  static numbers(cells: Iterable<number | null | undefined>): Column {
    return new Column("numbers", collect(cells, Number));
  }

  /** A string column (packed when it crosses). */
  static strings(cells: Iterable<string | null | undefined> | Texts): Column {
    return new Column("strings", cells instanceof Texts ? cells : collect(cells, String));
  }

  /** A boolean column. */
  static booleans(cells: Iterable<boolean | null | undefined>): Column {
    return new Column("booleans", collect(cells, Boolean));
  }

  /** A JSON column from values (`null` or `undefined` is a null cell). */
  static json(values: Iterable<unknown>): Column {
    return new Column("json", collect(values, (v) => JSON.stringify(v)));
  }

  /** The number of cells. */
  get length(): number {
    return this.data.length;
  }

  /** The raw cells: numbers, strings, booleans or JSON text, `null` for nulls. */
  cells(): Cell[] {
    if (this.data instanceof Texts) return this.data.cells();
    // Cells from the host hold `undefined` for none until read.
    const data = this.data;
    const out: Cell[] = new Array(data.length);
    for (let i = 0; i < data.length; i++) out[i] = data[i] ?? null;
    return out;
  }

  #cell(row: number): Cell {
    const cell = this.data instanceof Texts ? this.data.at(row) : this.data[row];
    return cell === undefined ? null : cell;
  }

  /**
   * The cell as text: strings as they are, numbers as JavaScript prints them, booleans as
   * `true`/`false`, JSON as its text. This is how the agent writes record ids.
   */
  text(row: number): string | null {
    const cell = this.#cell(row);
    return cell === null ? null : String(cell);
  }

  /** The cell as a JSON value (`null` when null or absent). */
  value(row: number): Json {
    const cell = this.#cell(row);
    if (cell !== null && this.kind === "json") {
      try {
        return JSON.parse(cell as string) as Json;
      } catch {
        return null;
      }
    }
    return cell;
  }

  /** Every cell as a JSON value. */
  values(): Json[] {
    if (this.kind !== "json") return this.cells();
    const out: Json[] = new Array(this.length);
    for (let i = 0; i < out.length; i++) out[i] = this.value(i);
    return out;
  }

  /** The WIT `packed.column` (a computed field's answer). */
  toPacked(): PackedColumn {
    const data = this.data;
    switch (this.kind) {
      // The bindings lower a null cell as none, as they do an undefined one: no copy needed.
      case "numbers":
        return { tag: "numbers", val: data as (number | undefined)[] };
      case "booleans":
        return { tag: "booleans", val: data as (boolean | undefined)[] };
      default: {
        const texts = data instanceof Texts ? data : Texts.of(data as readonly (string | null)[]);
        return { tag: this.kind, val: texts.toWit() };
      }
    }
  }

  /** A column from a WIT `types.column` or `packed.column` case. */
  static fromWit(data: WitColumn | PackedColumn): Column {
    switch (data.tag) {
      // Kept as the bindings lift them (`undefined` for none): `cells()` converts on reading.
      case "numbers":
      case "booleans":
        return new Column(data.tag, data.val as Cell[]);
      default:
        if (Array.isArray(data.val)) return new Column(data.tag, data.val as Cell[]);
        return new Column(data.tag, Texts.fromWit(data.val as PackedTexts));
    }
  }
}

/**
 * Rows in columnar form: what a computed field receives (its dependencies, de-duplicated) and
 * what {@link CollectionRef.list} returns. Columns are named by field or relation path
 * (`customer:firstName`).
 */
export class Rows implements Iterable<JsonObject> {
  readonly #names: string[];
  readonly #columns: Column[];
  readonly #byName = new Map<string, Column>();

  constructor(
    readonly length: number,
    names: string[],
    columns: Column[],
  ) {
    for (let i = 0; i < columns.length; i++) {
      const column = columns[i];
      if (column.length !== length) throw new InternalError(`column \`${names[i]}\` has ${column.length} cells for ${length} rows`);
      this.#byName.set(names[i], column);
    }
    this.#names = names;
    this.#columns = columns;
  }

  /** Rows from a WIT `types.batch` or `packed.batch`. */
  static fromWit(batch: Batch | PackedBatch): Rows {
    const names: string[] = new Array(batch.columns.length);
    const columns: Column[] = new Array(batch.columns.length);
    for (let i = 0; i < names.length; i++) {
      names[i] = batch.columns[i].name;
      columns[i] = Column.fromWit(batch.columns[i].data);
    }
    return new Rows(batch.len, names, columns);
  }

  /** The column names, in order. */
  names(): string[] {
    return this.#names.slice();
  }

  /** The column with this name. */
  column(name: string): Column {
    const column = this.#byName.get(name);
    if (column === undefined) throw new InternalError(`no column \`${name}\` in the rows`);
    return column;
  }

  /**
   * A string-like column (strings, dates, uuids, enums; JSON accepted) as strings, `null` for
   * nulls. A packed column is unpacked once, on the first call.
   */
  text(name: string): (string | null)[] {
    const column = this.column(name);
    if (column.kind !== "strings" && column.kind !== "json") throw new InternalError(`column \`${name}\` does not hold strings`);
    return column.cells() as (string | null)[];
  }

  /**
   * Any column as text, one cell per row (see {@link Column.text}): the exact text of bigints,
   * decimals and bytes.
   */
  texts(name: string): (string | null)[] {
    const column = this.column(name);
    const out: (string | null)[] = new Array(this.length);
    for (let i = 0; i < out.length; i++) out[i] = column.text(i);
    return out;
  }

  /** A number column. Exact numbers (bigints, PostgreSQL decimals) come as strings. */
  numbers(name: string): (number | null)[] {
    const column = this.column(name);
    if (column.kind !== "numbers") throw new InternalError(`column \`${name}\` does not hold numbers`);
    return column.cells() as (number | null)[];
  }

  /** A boolean column. */
  booleans(name: string): (boolean | null)[] {
    const column = this.column(name);
    if (column.kind !== "booleans") throw new InternalError(`column \`${name}\` does not hold booleans`);
    return column.cells() as (boolean | null)[];
  }

  /** One cell as a JSON value (`null` for a null cell or an unknown column). */
  value(row: number, name: string): Json {
    return this.#byName.get(name)?.value(row) ?? null;
  }

  /** Row `row` as an object of every column. */
  record(row: number): JsonObject {
    const out: JsonObject = {};
    for (let i = 0; i < this.#names.length; i++) out[this.#names[i]] = this.#columns[i].value(row);
    return out;
  }

  /** Every row as an object. */
  records(): JsonObject[] {
    const names = this.#names;
    const values: Json[][] = new Array(names.length);
    for (let i = 0; i < names.length; i++) values[i] = this.#columns[i].values();
    const out: JsonObject[] = new Array(this.length);
    for (let row = 0; row < out.length; row++) {
      const record: JsonObject = {};
      for (let i = 0; i < names.length; i++) record[names[i]] = values[i][row];
      out[row] = record;
    }
    return out;
  }

  [Symbol.iterator](): Iterator<JsonObject> {
    return this.records()[Symbol.iterator]();
  }
}

// ---------------------------------------------------------------------------------------------
// Caller, context, collections
// ---------------------------------------------------------------------------------------------

/** The user on whose behalf a handler runs (the spec's Caller). */
export class Caller {
  constructor(
    readonly id: number = 0,
    readonly email: string = "",
    readonly firstName: string = "",
    readonly lastName: string = "",
    readonly team: string = "",
    readonly role: string = "",
    readonly tags: ReadonlyArray<readonly [string, string]> = [],
    /** IANA timezone of the request (`Europe/Paris`). */
    readonly timezone: string = "UTC",
  ) {}

  static fromWit(c: WitCaller): Caller {
    return new Caller(Number(c.id), c.email, c.firstName, c.lastName, c.team, c.role, c.tags, c.timezone);
  }

  /** The value of one user tag. */
  tag(key: string): string | undefined {
    return this.tags.find(([k]) => k === key)?.[1];
  }
}

/** Calls a host import, turning its WIT error into the SDK's error. */
function host<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw e instanceof CanopyError ? e : fromHost(e);
  }
}

/** A sort clause. */
export type Sort = { field: string; ascending: boolean }[];

/**
 * A collection seen through the host's customized stack, with the caller of the request that
 * invoked the handler (their permissions and scopes apply to reads). Filters are condition trees
 * in the agent's JSON shape (`{field: "id", operator: "Equal", value: 1}`, `{aggregator: "And",
 * conditions: [...]}`) or `null` for none.
 */
export class CollectionRef {
  constructor(readonly name: string) {}

  /**
   * Records matching `filter` with the fields of `projection` (relation paths allowed), sorted
   * (`[{field: "id", ascending: true}]`) and paged (`[skip, limit]`).
   */
  list(filter: Json = null, projection: readonly string[] = [], sort: Sort | null = null, page?: [number, number]): Rows {
    return Rows.fromWit(host(() => collections.list(this.name, dumps(filter), [...projection], dumps(sort), page)));
  }

  /**
   * An aggregation (`{operation: "Sum", field: "amount", groups: []}`); returns the
   * `[{value, group}]` list.
   */
  aggregate(filter: Json, aggregation: Json, limit?: number): { value: Json; group: JsonObject }[] {
    return JSON.parse(host(() => collections.aggregate(this.name, dumps(filter), dumps(aggregation), limit)));
  }

  /** Creates records; returns them as stored. */
  create(records: readonly JsonObject[]): JsonObject[] {
    return JSON.parse(host(() => collections.create(this.name, dumps(records))));
  }

  /** Applies `patch` to every record matching `filter`. */
  update(filter: Json, patch: JsonObject): void {
    host(() => collections.update(this.name, dumps(filter), dumps(patch)));
  }

  /** Deletes every record matching `filter`. */
  delete(filter: Json): void {
    host(() => collections.delete(this.name, dumps(filter)));
  }
}

/** What every handler receives: who calls, and on which collection. */
export class Context {
  #caller: Caller | undefined;
  #witCaller: WitCaller | undefined;

  constructor(
    caller?: Caller,
    /** The customized collection (`undefined` for datasource charts). */
    readonly collectionName?: string,
  ) {
    this.#caller = caller;
  }

  static fromWit(ctx: CallContext): Context {
    // The caller is converted on first use: most computed fields never read it.
    const context = new Context(undefined, ctx.collection);
    context.#witCaller = ctx.caller;
    return context;
  }

  /** The request's caller. */
  get caller(): Caller {
    if (this.#caller === undefined) this.#caller = this.#witCaller ? Caller.fromWit(this.#witCaller) : new Caller();
    return this.#caller;
  }

  /** A handle on any collection, through the host's customized stack with this caller. */
  collection(name: string): CollectionRef {
    return new CollectionRef(name);
  }

  /** A handle on the customized collection itself. */
  this(): CollectionRef {
    if (this.collectionName === undefined) throw new InternalError("this handler has no collection");
    return new CollectionRef(this.collectionName);
  }
}

// ---------------------------------------------------------------------------------------------
// Logging
// ---------------------------------------------------------------------------------------------

/** Log levels of {@link log}. */
export type Level = "trace" | "debug" | "info" | "warn" | "error";

/** Writes a line to the host's log, prefixed with the plugin's name. */
export function log(level: Level, message: string): void {
  logging.log(level, message);
}

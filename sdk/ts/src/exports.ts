/**
 * The component's exports: the `customizer` and `workflow` objects ComponentizeJS binds to the
 * WIT exports `canopy:plugin/customizer` and `canopy:plugin/workflow`, dispatching the host's
 * calls to the handlers `customize` declared. The plugin's entry module exports them:
 *
 *     export const { customizer, workflow } = exportPlugin(customize);
 *
 * The handler table is built once per instance, on its first call, by running `customize`, and
 * kept for the calls that follow: the host reuses warm instances for pure calls (computed
 * fields, search, segments, charts, operator replacements) and gives the others a fresh one.
 *
 * Everything a handler throws is answered, never let through: a `CanopyError` as its WIT error
 * case, anything else as `internal` with its name, message and place. ComponentizeJS would print
 * an escaping exception to stderr and trap, and the host drops a warm instance that wrote to
 * stderr; for the same reason `console` is sent to the host's log from the first call on.
 */

import { ActionContext, ActionResult, evaluateForm, type Action } from "./actions.js";
import { ChartContext, ChartResult, HookContext, StepContext, StepOutput, WriteContext } from "./contexts.js";
import { DataSource, type Handler } from "./customize.js";
import { type Column, Context, type JsonObject, type Level, Rows, asObject, dumps, log } from "./data.js";
import { CanopyError, InternalError, type ErrorKind } from "./errors.js";
import type { ActionOutcome, CallContext, Customization, Kind, PackedBatch, PackedColumn, StepDeclaration, StepInput, WitStepOutput } from "./wit.js";

type Customize = (ds: DataSource) => void;

let customize: Customize | undefined;
let table: DataSource | undefined;
/** A plugin declared at import: its table is in the build-time snapshot, and no instance runs a `customize`. */
let staticTable: DataSource | undefined;
let consoleInstalled = false;

/** A value as `console.log` shows it. */
function show(value: unknown): string {
  if (typeof value === "string") return value;
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  try {
    const text = JSON.stringify(value, (_, v) => (typeof v === "bigint" ? v.toString() : v));
    return text === undefined ? String(value) : text;
  } catch {
    return String(value);
  }
}

/**
 * Sends `console` to the host's log (`log`/`info` at info, `warn`/`error` at warn, `debug` at
 * debug, `trace` at trace). Done on the first call, not at import: ComponentizeJS evaluates the
 * module at build time, when there is no host to call.
 */
function installConsole(): void {
  if (consoleInstalled) return;
  consoleInstalled = true;
  const to =
    (level: Level) =>
    (...args: unknown[]) =>
      log(level, args.map(show).join(" "));
  const c = globalThis.console as unknown as Record<string, unknown>;
  c.log = c.info = to("info");
  c.warn = c.error = to("warn");
  c.debug = to("debug");
  c.trace = to("trace");
}

/** An unexpected error as a one-line message naming where it was thrown. */
export function describe(e: unknown): string {
  if (!(e instanceof Error)) return `uncaught ${show(e)}`;
  // SpiderMonkey's stack lines read `function@file:line:column`.
  const top = (e.stack ?? "").split("\n").find((line) => line.includes("@"));
  const match = top?.match(/^(.*)@(.*):(\d+):\d+$/);
  const place = match ? ` (at ${match[2]}:${match[3]}${match[1] ? `, in ${match[1]}` : ""})` : "";
  return `${e.name}: ${e.message}${place}`;
}

type WitResult<T> = { tag: "ok"; val: T } | { tag: "err"; val: { tag: ErrorKind; val: string } };

/** Runs an export, answering every error as the WIT error it stands for. */
function guard<A extends unknown[], R>(f: (...args: A) => R | Promise<R>): (...args: A) => WitResult<R> | Promise<WitResult<R>> {
  const failed = (e: unknown): WitResult<R> => ({ tag: "err", val: e instanceof CanopyError ? e.toWit() : { tag: "internal", val: describe(e) } });
  // Synchronous unless the handler answers a promise: the bindings await the export anyway.
  return (...args: A) => {
    installConsole();
    try {
      const value = f.apply(undefined, args);
      if (value instanceof Promise) return value.then((val: R): WitResult<R> => ({ tag: "ok", val }), failed);
      return { tag: "ok", val: value };
    } catch (e) {
      return failed(e);
    }
  };
}

function build(ds: DataSource): DataSource {
  if (staticTable !== undefined) return staticTable;
  if (customize === undefined) throw new InternalError("no plugin exported: call exportPlugin(customize)");
  customize(ds);
  return ds;
}

/** Handler `id` of this instance's table (built first if there is none). */
function handler(id: number, kinds: readonly Handler["kind"][]): Handler {
  table ??= build(new DataSource());
  const h = table.handlers[id];
  if (h === undefined) throw new InternalError(`no handler ${id}`);
  if (kinds.indexOf(h.kind) < 0) throw new InternalError(`handler ${id} is not of the called kind`);
  return h;
}

function object(text: string): JsonObject {
  return asObject(JSON.parse(text)) ?? {};
}

/** The `canopy:plugin/customizer` export. */
const customizer = {
  declare: guard((schemaJson: string, optionsJson: string): Customization[] => {
    const schema = JSON.parse(schemaJson);
    const options = JSON.parse(optionsJson);
    const ds = build(new DataSource(schema, options));
    // This instance's copy of the snapshot learns the schema and options now.
    if (ds === staticTable) ds.setEnvironment(schema, options);
    table = ds;
    return ds.declarations.map((d) => ({
      collection: d.collection,
      kind: d.kind as Kind,
      name: d.name,
      definition: dumps(d.definition),
      handler: d.handler,
    }));
  }),

  // The hot path (every list page with a computed field): synchronous unless the field is.
  compute: guard((id: number, ctx: CallContext, rows: PackedBatch): PackedColumn | Promise<PackedColumn> => {
    const batch = Rows.fromWit(rows);
    const packed = (column: Column): PackedColumn => {
      if (column.length !== batch.length) throw new InternalError(`computed field returned ${column.length} values for ${batch.length} rows`);
      return column.toPacked();
    };
    const column: Column | Promise<Column> = handler(id, ["field"]).fn(batch, Context.fromWit(ctx));
    return column instanceof Promise ? column.then(packed) : packed(column);
  }),

  actionForm: guard(async (id: number, ctx: CallContext, actionJson: string): Promise<string> => {
    const action: Action = handler(id, ["action"]).fn;
    return dumps(await evaluateForm(action, new ActionContext(Context.fromWit(ctx), object(actionJson))));
  }),

  actionExecute: guard(async (id: number, ctx: CallContext, actionJson: string): Promise<ActionOutcome> => {
    const action: Action = handler(id, ["action"]).fn;
    const result = await action.execute(new ActionContext(Context.fromWit(ctx), object(actionJson)), ActionResult);
    if (!(result instanceof ActionResult)) throw new InternalError(`an action returned ${show(result)}, not an ActionResult`);
    return { result: dumps(result.toJson()), file: result.fileBytes };
  }),

  hook: guard(async (id: number, ctx: CallContext, hookJson: string): Promise<string | undefined> => {
    const h = handler(id, ["hook"]);
    const hc = new HookContext(Context.fromWit(ctx), h.position ?? "Before", h.operation ?? "List", object(hookJson));
    await h.fn(hc);
    const change = hc.change();
    return change === undefined ? undefined : dumps(change);
  }),

  segment: guard(async (id: number, ctx: CallContext): Promise<string> => dumps(await handler(id, ["segment"]).fn(Context.fromWit(ctx)))),

  search: guard(async (id: number, ctx: CallContext, search: string, extended: boolean): Promise<string | undefined> => {
    const tree = await handler(id, ["search"]).fn(search, extended, Context.fromWit(ctx));
    return tree === undefined || tree === null ? undefined : dumps(tree);
  }),

  chart: guard(async (id: number, ctx: CallContext, chartJson: string): Promise<string> => {
    const result = await handler(id, ["chart"]).fn(new ChartContext(Context.fromWit(ctx), object(chartJson)));
    return dumps(result instanceof ChartResult ? result.toJson() : result);
  }),

  write: guard(async (id: number, ctx: CallContext, writeJson: string): Promise<string | undefined> => {
    const payload = object(writeJson);
    const patch = await handler(id, ["write"]).fn(payload.value ?? null, new WriteContext(Context.fromWit(ctx), payload));
    if (patch === null || patch === undefined) return undefined;
    if (asObject(patch) === undefined) throw new InternalError(`a write replacement returned ${dumps(patch)}, not an object`);
    return dumps(patch);
  }),

  replaceOperator: guard(async (id: number, ctx: CallContext, valueJson: string): Promise<string> =>
    dumps(await handler(id, ["operator"]).fn(JSON.parse(valueJson), Context.fromWit(ctx))),
  ),

  overrideOperation: guard(async (id: number, ctx: CallContext, overrideJson: string): Promise<string | undefined> => {
    const h = handler(id, ["create", "update", "delete"]);
    const payload = object(overrideJson);
    const context = Context.fromWit(ctx);
    if (h.kind === "create") {
      const data = Array.isArray(payload.data) ? payload.data : [];
      return dumps([...(await h.fn(data, context))]);
    }
    if (h.kind === "update") await h.fn(payload.filter ?? null, asObject(payload.patch) ?? {}, context);
    else await h.fn(payload.filter ?? null, context);
    return undefined;
  }),
};

/** The `canopy:plugin/workflow` export. */
const workflow = {
  declareSteps: guard((): StepDeclaration[] => {
    table ??= build(new DataSource());
    return table.steps.map(([name, id]) => ({ name, handler: id }));
  }),

  workflowStep: guard(async (id: number, ctx: CallContext, input: StepInput): Promise<WitStepOutput> => {
    const step = new StepContext(Context.fromWit(ctx), input.recordId, JSON.parse(input.contextJson), JSON.parse(input.settingsJson));
    const output: StepOutput = (await handler(id, ["step"]).fn(step)) ?? StepOutput.next();
    return { option: output.option, valuesJson: dumps(output.values) };
  }),
};

/** The objects the plugin's entry module exports as `customizer` and `workflow`. */
export type Exports = { customizer: typeof customizer; workflow: typeof workflow };

/**
 * Makes `f` the plugin and returns the exports; the entry module must export them by name:
 *
 *     export const { customizer, workflow } = exportPlugin(customize);
 */
export function exportPlugin(f: Customize): Exports {
  customize = f;
  table = staticTable = undefined;
  return { customizer, workflow };
}

/** Makes `plugin`, whose declarations were made at import, the plugin (what `Plugin.export` calls). */
export function exportStatic(plugin: DataSource): Exports {
  customize = undefined;
  table = staticTable = plugin;
  return { customizer, workflow };
}

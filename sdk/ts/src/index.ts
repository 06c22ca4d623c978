/**
 * `canopy-sdk`: write Canopy plugins in TypeScript, built into a WebAssembly component with
 * ComponentizeJS against `canopy:plugin@0.3.0` ({@link WIT_VERSION}).
 *
 * A plugin is one module whose `customize(ds)` declares everything, exported with
 * {@link exportPlugin}:
 *
 *     import { type DataSource, Texts, exportPlugin } from "canopy-sdk";
 *
 *     function customize(ds: DataSource) {
 *       ds.collection("customers").addField("full_name", {
 *         columnType: "String",
 *         dependencies: ["first_name", "last_name"],
 *         getValues: (rows) => {
 *           const last = rows.text("last_name");
 *           return Texts.of(rows.text("first_name").map((first, i) => `${first ?? ""} ${last[i] ?? ""}`));
 *         },
 *       });
 *     }
 *
 *     // ComponentizeJS binds these two names to the component's exports.
 *     export const { customizer, workflow } = exportPlugin(customize);
 *
 * The concepts are the Rust and Python SDKs'; the names and shapes are the Node agent's.
 */

export { ActionContext, ActionResult } from "./actions.js";
export type { Action, Dynamic, FieldElement, FieldType, FormElement, HtmlBlockElement, LayoutElement, PageElement, RowElement, Scope, SeparatorElement } from "./actions.js";
export { ChartContext, ChartResult, HookContext, StepContext, StepOutput, WriteContext } from "./contexts.js";
export type { BinaryMode, Entries, Operation, Position, TimeRange } from "./contexts.js";
export { CollectionCustomizer, DataSource, Plugin } from "./customize.js";
export type { ColumnType, ComputedField, ComputedValues, TCollectionName, TFieldName, TSchema } from "./customize.js";
export { Caller, CollectionRef, Column, Context, Rows, Texts, asNumber, asObject, asText, jsNumber, log } from "./data.js";
export type { ColumnKind, Json, JsonObject, Level, Sort } from "./data.js";
export { CanopyError, ForbiddenError, InternalError, NotFoundError, UnprocessableError, ValidationError } from "./errors.js";
export { exportPlugin, exportStatic } from "./exports.js";
export type { Exports } from "./exports.js";
export { WIT_VERSION } from "./wit.js";

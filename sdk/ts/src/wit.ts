/**
 * The only module that names the WIT interfaces. ComponentizeJS links these specifiers to the
 * component's imports (`canopy:plugin/...@0.3.0`); esbuild leaves them external, and the types
 * come from `jco guest-types` (written to `generated/` by `npm run types`).
 */

export * as collections from "canopy:plugin/collections@0.3.0";
export * as environment from "canopy:plugin/environment@0.3.0";
export * as logging from "canopy:plugin/logging@0.3.0";

export type { Batch as PackedBatch, Column as PackedColumn, Texts as PackedTexts } from "canopy:plugin/packed@0.3.0";
export type {
  ActionOutcome,
  Batch,
  CallContext,
  Caller as WitCaller,
  Column as WitColumn,
  Customization,
  Kind,
} from "canopy:plugin/types@0.3.0";
export type { StepDeclaration, StepInput, StepOutput as WitStepOutput } from "canopy:plugin/workflow@0.3.0";

/** The version of the WIT package this SDK builds against; the host checks it at load. */
export const WIT_VERSION = "0.3.0";

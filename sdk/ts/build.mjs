#!/usr/bin/env node
// Builds a TypeScript plugin into a WebAssembly component:
//   node build.mjs ENTRY.ts OUTPUT.wasm [--no-check]
// 1. `jco guest-types` writes the WIT's TypeScript declarations to generated/ (once per WIT);
// 2. `tsc` type-checks the plugin and this SDK (skipped with --no-check);
// 3. esbuild bundles them into one ES module, the WIT imports left external;
// 4. ComponentizeJS evaluates the bundle in SpiderMonkey, snapshots it, and writes the component
//    (with CANOPY_WEVAL, compiled ahead of time by weval: see below).
// The tools are the nearest node_modules above this file (`npm ci` installs the versions of
// package-lock.json): sdk/ts's in the checkout, the plugin's own in a scaffolded plugin, where this
// file is vendor/canopy-sdk/build.mjs.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const check = !args.includes("--no-check");
const [entry, output] = args.filter((a) => !a.startsWith("--"));
if (!entry || !output) {
  console.error("usage: node build.mjs ENTRY.ts OUTPUT.wasm [--no-check]");
  process.exit(2);
}
// A scaffolded plugin carries its own copy of the contract in wit/; the SDK uses the checkout's.
const wit = process.env.CANOPY_WIT ?? [join(here, "wit/plugin@0.3.0"), join(here, "../../wit/plugin@0.3.0")].find((p) => existsSync(p));
/**
 * A `canopy-language` custom section naming the plugin's language, appended to the component:
 * the host shows it (`GET /_canopy/plugins`, the console). ComponentizeJS's own `producers`
 * section says `JavaScript`, and the engine's module says C11 before it.
 */
function languageSection(language) {
  const leb = (n) => {
    const out = [];
    do {
      out.push((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
      n >>>= 7;
    } while (n > 0);
    return out;
  };
  const name = Buffer.from("canopy-language");
  const body = Buffer.concat([Buffer.from(leb(name.length)), name, Buffer.from(language)]);
  return Buffer.concat([Buffer.from([0]), Buffer.from(leb(body.length)), body]);
}
let modules = here;
while (!existsSync(join(modules, "node_modules/@bytecodealliance/componentize-js"))) {
  if (dirname(modules) === modules) {
    console.error(`the TypeScript toolchain is not installed: run \`npm ci\` beside package.json (above ${here})`);
    process.exit(1);
  }
  modules = dirname(modules);
}
modules = join(modules, "node_modules");
const bin = (tool) => join(modules, ".bin", tool);
const started = Date.now();

const generated = join(here, "generated");
const stamp = join(generated, ".wit");
const witText = readFileSync(join(wit, "plugin.wit"), "utf8");
if (!existsSync(stamp) || readFileSync(stamp, "utf8") !== witText) {
  execFileSync(bin("jco"), ["guest-types", wit, "--world-name", "customization", "-o", generated, "-q"], { stdio: "inherit" });
  writeFileSync(stamp, witText);
}

if (check) {
  // The plugin's own tsconfig.json when it has one, else this SDK's with the entry added.
  const project = existsSync(join(dirname(resolve(entry)), "tsconfig.json")) ? dirname(resolve(entry)) : here;
  execFileSync(bin("tsc"), ["-p", project], { stdio: "inherit" });
}

// Named after the entry, in a folder of its own: error messages cite `NAME.js:LINE`.
const bundleDir = mkdtempSync(join(tmpdir(), "canopy-ts-"));
const bundle = join(bundleDir, `${basename(entry).replace(/\.[cm]?ts$/, "")}.js`);
const esbuild = await import(join(modules, "esbuild/lib/main.js"));
await esbuild.build({
  entryPoints: [resolve(entry)],
  outfile: bundle,
  bundle: true,
  format: "esm",
  platform: "neutral",
  target: "es2022",
  // The SDK by name, from this folder, wherever the plugin is.
  alias: { "canopy-sdk": join(here, "src/index.ts") },
  external: ["canopy:plugin/*"],
  logLevel: "warning",
});

// ComponentizeJS's ahead-of-time mode (weval): the plugin's functions are compiled into the
// component instead of run by SpiderMonkey's interpreter. Opt-in: it needs a weval binary of the
// version ComponentizeJS expects (0.5.0), named by CANOPY_WEVAL (`cargo install weval@0.5.0
// --locked`); ComponentizeJS would otherwise download one from GitHub at build time.
const weval = process.env.CANOPY_WEVAL;
if (weval && !existsSync(weval)) {
  console.error(`CANOPY_WEVAL names no file: ${weval} (cargo install weval@0.5.0 --locked --root DIR)`);
  process.exit(1);
}

const { componentize } = await import(join(modules, "@bytecodealliance/componentize-js/src/componentize.js"));
try {
  const { component } = await componentize({
    sourcePath: bundle,
    witPath: wit,
    worldName: "customization",
    // The host links WASI p2 without wasi:http: no fetch, no incoming handler.
    disableFeatures: ["http", "fetch-event"],
    ...(weval ? { enableAot: true, wevalBin: weval } : {}),
  });
  mkdirSync(dirname(resolve(output)), { recursive: true });
  writeFileSync(output, Buffer.concat([component, languageSection("typescript")]));
} finally {
  rmSync(bundleDir, { recursive: true, force: true });
}
console.log(`${output}: ${statSync(output).size} bytes in ${((Date.now() - started) / 1000).toFixed(1)} s`);

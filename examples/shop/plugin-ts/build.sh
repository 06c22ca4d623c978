#!/usr/bin/env bash
# Builds the shop plugin (TypeScript) into a WebAssembly component:
#   ./build.sh [OUTPUT]            (default: shop.wasm beside this script)
# sdk/ts/build.mjs type-checks it with tsc, bundles it with the SDK (esbuild), and hands the
# bundle to ComponentizeJS, which evaluates it in SpiderMonkey and snapshots the engine into the
# component. The tools are sdk/ts's node_modules: `(cd sdk/ts && npm ci)` once.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
sdk="$(cd "$here/../../../sdk/ts" && pwd)"
out="${1:-$here/shop.wasm}"
if [ ! -d "$sdk/node_modules/@bytecodealliance/componentize-js" ]; then
    echo "the TypeScript toolchain is not installed: (cd $sdk && npm ci)" >&2
    exit 1
fi
node "$sdk/build.mjs" "$here/shop.ts" "$out"

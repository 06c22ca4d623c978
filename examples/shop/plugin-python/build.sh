#!/usr/bin/env bash
# Builds the shop plugin (Python) into a WebAssembly component with componentize-py:
#   ./build.sh [OUTPUT]            (default: shop.wasm beside this script)
# componentize-py generates the bindings of wit/plugin@0.3.0 inside the build (they are never
# committed), pre-initializes CPython with this module imported, and writes the component.
# Needs componentize-py 0.25.1 (`pip install componentize-py==0.25.1`, or set COMPONENTIZE_PY to
# its path). `BINDINGS=1 ./build.sh` also writes the generated bindings to build/bindings, for
# an editor or a type checker (they are what the component uses).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="${1:-$here/shop.wasm}"
wit="$root/wit/plugin@0.3.0"
sdk="$root/sdk/python/src"
want="0.25.1"

cpy="${COMPONENTIZE_PY:-$(command -v componentize-py || true)}"
if [ -z "$cpy" ]; then
    echo "componentize-py not found: pip install componentize-py==$want (or set COMPONENTIZE_PY)" >&2
    exit 1
fi
# The only version checked: its generated module names (`wit_world`) and its embedded CPython
# are what the SDK is written against.
version="$("$cpy" --version 2>/dev/null | awk '{print $NF}')"
if [ "$version" != "$want" ]; then
    echo "warning: componentize-py $version, the SDK is tested with $want" >&2
fi

if [ "${BINDINGS:-0}" = 1 ]; then
    rm -rf "$here/build/bindings"
    "$cpy" -d "$wit" -w customization bindings "$here/build/bindings"
fi

# -p: this folder (the plugin module) and the SDK's sources. No VIRTUAL_ENV site-packages is
# needed: the plugin uses the standard library and the SDK only.
start=$(date +%s)
"$cpy" -d "$wit" -w customization componentize \
    -p "$here" -p "$sdk" shop_plugin -o "$out"
echo "$(basename "$out"): $(stat -c %s "$out") bytes in $(( $(date +%s) - start )) s"

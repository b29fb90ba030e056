#!/usr/bin/env bash
# Rebuilds lanczos_wasm.ts from lanczos.wat with wat2wasm (Debian: apt-get install wabt;
# the committed module was built with wabt 1.0.32). Run from the repository root.
set -euo pipefail
here=mod/image
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
wat2wasm --version
wat2wasm "$here/lanczos.wat" -o "$tmp/lanczos.wasm"
b64=$(base64 -w0 "$tmp/lanczos.wasm")
cat >"$here/lanczos_wasm.ts" <<TS
/**
 * The WebAssembly module of \`lanczos.wat\` (PIL's resampling passes with
 * 128-bit SIMD), as built by \`make_lanczos_wasm.sh\`. Generated: edit the
 * \`.wat\` file and rebuild instead of editing this one.
 *
 * @module
 */

/** The binary module, base64-encoded ($(stat -c %s "$tmp/lanczos.wasm") bytes). */
export const LANCZOS_WASM_BASE64 =
  "$b64";
TS
deno fmt "$here/lanczos_wasm.ts"

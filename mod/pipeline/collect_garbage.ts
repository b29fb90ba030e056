/**
 * A full garbage collection on demand, for the one moment it pays: right
 * after the models are loaded. Loading leaves large buffers behind in the
 * JavaScript heap of the isolate that opened them (the VAE encoder's rewrite
 * reads its 137 MB model and writes a rewritten copy, both handed to ONNX
 * Runtime, which keeps its own), and nothing in an idle worker allocates
 * enough to make V8 collect them, so they were still resident when the first
 * image's UNet run reached the process's peak: on a full-size diffusers-script
 * export with the fast preset, collecting them took the first image's peak
 * RSS from 6.15 GB to 5.73 GB (docs/performance.md, "A diffusers-script
 * export").
 *
 * V8 exposes `gc()` only with `--expose-gc`; set at run time
 * (`v8.setFlagsFromString`), the flag takes effect in contexts created after
 * it, so a fresh `node:vm` context hands the function over. No command-line
 * flag is needed, and where the runtime refuses, nothing is collected early.
 *
 * @module
 */

import v8 from "node:v8";
import vm from "node:vm";

let collect: (() => void) | null | undefined;

/** Runs a full, synchronous garbage collection of this isolate; false when V8 offers none. */
export function collectGarbage(): boolean {
  if (collect === undefined) {
    try {
      v8.setFlagsFromString("--expose-gc");
      const gc = vm.runInNewContext("typeof gc === 'function' ? gc : null");
      collect = typeof gc === "function" ? gc as () => void : null;
    } catch {
      collect = null;
    }
  }
  if (!collect) return false;
  collect();
  return true;
}

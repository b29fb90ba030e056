/**
 * Helpers for this folder's tests: open a built model from memory with its
 * external data, and compare outputs. Not part of the public API.
 *
 * @module
 */

import { createSessionFromBytes, type Session } from "../onnx/mod.ts";
import type { BuiltFile } from "./model_set.ts";

/** Opens `path` from in-memory files, handing over its external data file if any. */
export async function openBuilt(files: readonly BuiltFile[], path: string): Promise<Session> {
  const model = files.find((f) => f.path === path);
  if (!model) throw new Error(`no built file ${path}`);
  const dir = path.slice(0, path.lastIndexOf("/") + 1);
  const external = files
    .filter((f) =>
      f !== model && f.path.startsWith(dir) && !f.path.endsWith(".onnx") &&
      !f.path.slice(dir.length).includes("/")
    )
    .map((f) => ({ path: f.path.slice(dir.length), data: f.data }));
  return await createSessionFromBytes(model.data, external, { label: path, intraOpThreads: 1 });
}

/** Largest absolute element-wise difference. */
export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} vs ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

/** Deterministic pseudo-random values in [-1, 1) for test inputs. */
export function wave(n: number, phase = 0): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => Math.sin(i * 1.7 + phase) * Math.cos(i * 0.31));
}

/**
 * What the engine needs of an open model, so tests can wrap sessions (count
 * calls, record batch sizes) without touching ONNX Runtime.
 *
 * @module
 */

import type { Feeds, IoMeta, SessionOptions, Tensor } from "../onnx/mod.ts";

/** An open model: I/O metadata, `run` and `release` (what `mod/onnx`'s `Session` offers). */
export interface ModelSession {
  /** Model inputs in graph order. */
  readonly inputs: readonly IoMeta[];
  /** Model outputs in graph order. */
  readonly outputs: readonly IoMeta[];
  /** Runs the model and returns its outputs by name. */
  run(feeds: Feeds, outputNames?: readonly string[]): Promise<Record<string, Tensor>>;
  /** Frees the native session. */
  release(): Promise<void>;
}

/** Opens the model file at `path`; the default is `mod/onnx`'s `createSession`. */
export type SessionOpener = (path: string, options: SessionOptions) => Promise<ModelSession>;

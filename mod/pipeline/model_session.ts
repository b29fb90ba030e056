/**
 * What the engine needs of an open model, so tests can wrap sessions (count
 * calls, record batch sizes) without touching ONNX Runtime.
 *
 * @module
 */

import type { ExternalDataFile, Feeds, IoMeta, SessionOptions, Tensor } from "../onnx/mod.ts";

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

/** A model held in memory: a graph rewritten at load time and the external data it names. */
export interface ModelBytes {
  /** The file it was read from (for messages and labels). */
  path: string;
  /** The `.onnx` protobuf. */
  bytes: Uint8Array;
  /** Every external data file the model names, by its recorded `location`. */
  externalData: ExternalDataFile[];
  /**
   * The name and version of the rewrite that made `bytes` from `path`, when
   * it depends on nothing else: the optimised-graph cache then keys the graph
   * by the file and this name (`mod/onnx` `SessionOptions.rewrite`).
   */
  rewrite?: string;
}

/** Opens a model from memory; the default is `mod/onnx`'s `createSessionFromBytes`. */
export type BytesOpener = (model: ModelBytes, options: SessionOptions) => Promise<ModelSession>;

/**
 * Opens what an earlier start kept of `path` rewritten by `rewrite` (the
 * optimised-graph cache), without reading the file; null when nothing
 * current is kept. The default is `mod/onnx`'s `openCachedRewrite`.
 */
export type RewriteCacheOpener = (
  model: { path: string; rewrite: string },
  options: SessionOptions,
) => Promise<ModelSession | null>;

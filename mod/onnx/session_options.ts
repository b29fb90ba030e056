/**
 * What an ONNX Runtime session is opened with and what its I/O looks like:
 * the types below the runtime (`runtime.ts`), which the optimised-graph
 * cache, the provider explanations and the model-file reader use without
 * importing the runtime itself.
 *
 * @module
 */

/** Execution providers this project can ask for. */
export type ExecutionProvider = "cpu" | "cuda" | "webgpu";

/**
 * Where ONNX Runtime leaves an output: CPU memory (readable from
 * JavaScript), or a buffer on the WebGPU device (ORT's "gpu-buffer"
 * location) that only another session of the same process can read, as a
 * feed. onnxruntime-node 1.30 cannot download a device tensor: its
 * `download` is "not implemented" and calling `getData()` aborts the process
 * (onnxruntime `js/node/src/tensor_helper.cc`), so this door never does.
 */
export type OutputLocation = "cpu" | "gpu-buffer";

/** ONNX Runtime graph optimization levels (the names ORT itself uses). */
export type GraphOptimization = "disabled" | "basic" | "extended" | "all";

/** How ONNX Runtime schedules the nodes of one run (ORT's `ExecutionMode`). */
export type ExecutionMode = "sequential" | "parallel";

/** Options of `createSession` / `createSessionFromBytes` (runtime.ts). */
export interface SessionOptions {
  /** Execution provider; default "cpu". ORT falls back to CPU per node for unsupported ops. */
  executionProvider?: ExecutionProvider;
  /**
   * Threads inside one operator; 0 or absent = every core the process may
   * use (its CPU affinity and cgroup quota, `usable_cores.ts`), not ONNX
   * Runtime's own count of physical cores.
   */
  intraOpThreads?: number;
  /**
   * Threads across operators, used by the "parallel" execution mode only;
   * 0 or absent = the usable cores there (`threads.ts`).
   */
  interOpThreads?: number;
  /** Graph optimization level; default "all". */
  graphOptimization?: GraphOptimization;
  /** Name used in error messages, e.g. "unet"; defaults to the file name. */
  label?: string;
  /**
   * The CPU memory arena (`enableCpuMemArena`); default ORT's (on). The arena
   * keeps every block it ever handed out, so a session's peak activation
   * memory stays resident after the run (docs/performance.md).
   */
  cpuMemArena?: boolean;
  /**
   * Memory pattern planning (`enableMemPattern`); default ORT's (on): plans
   * one buffer for all intermediates of a run from the first run's shapes.
   */
  memoryPattern?: boolean;
  /** Node scheduling (`executionMode`); default ORT's ("sequential"). */
  executionMode?: ExecutionMode;
  /**
   * Outputs to leave on the device, by output name (ORT's
   * `preferredOutputLocation`); unnamed outputs come back to the CPU.
   * "gpu-buffer" needs the webgpu provider. Such outputs are tensors only
   * another session can read (`isDeviceTensor` (runtime.ts)); free them with
   * `releaseDeviceTensor` once the last run that reads them is done.
   */
  outputLocations?: Readonly<Record<string, OutputLocation>>;
  /**
   * A folder where ONNX Runtime's optimised graph of a model opened by path
   * is kept, so that later starts open it without optimising again
   * (`optimized_cache.ts`). Models opened from bytes need `readFrom` as well.
   */
  optimizedCache?: string;
  /**
   * For a model opened from bytes: the file they were read from (and
   * rewritten). With `optimizedCache`, such a model's optimised graph is
   * cached too, keyed by the bytes; without it, it is optimised at every open.
   */
  readFrom?: string;
  /**
   * With `readFrom`: the name and version of the rewrite that made the bytes
   * from that file, when it depends on nothing else. The cache then keys the
   * graph by the file's remembered hash and this name, not by the bytes, so
   * a later start finds it with `openCachedRewrite` (runtime.ts) without reading or
   * rewriting the file.
   */
  rewrite?: string;
  /**
   * Writes the graph ONNX Runtime optimised while opening to `path` (its
   * `optimizedModelFilePath`), every initializer of 1 KiB or more into
   * `externalData` beside it, and with `prepacked` also the weights its CPU
   * kernels pre-pack. What the cache builds with.
   */
  saveOptimized?: { path: string; externalData: string; prepacked: boolean };
}

/** One external-data file handed over in memory (for byte loads). */
export interface ExternalDataFile {
  /** The `location` written in the model, e.g. "weights.pb" or "model.onnx_data". */
  path: string;
  /** The file's bytes. */
  data: Uint8Array;
}

/** Name, element type and shape of one model input or output. */
export interface IoMeta {
  /** The graph input/output name. */
  readonly name: string;
  /**
   * ORT's element type string ("float32", "float16", "int32", "int64",
   * "float64", …), or "non-tensor" for sequences and maps.
   */
  readonly dtype: string;
  /** Dimensions: numbers for fixed dims, strings for symbolic (dynamic) ones. */
  readonly shape: readonly (number | string)[];
}

/** Anything with model I/O metadata; what `checkSession` needs. */
export interface SessionIo {
  /** The model's inputs, in graph order. */
  readonly inputs: readonly IoMeta[];
  /** The model's outputs, in graph order. */
  readonly outputs: readonly IoMeta[];
}

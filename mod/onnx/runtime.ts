/**
 * The only door to `onnxruntime-node`: session creation, the {@link Session}
 * wrapper with I/O metadata read from the model itself, and the tensor class.
 *
 * I/O metadata comes from `session.inputMetadata` / `outputMetadata`
 * (onnxruntime `js/node/lib/backend.ts`, PR #23937): the element type as a
 * string and the shape with symbolic dimensions as strings. Nothing about a
 * model's contract is guessed from flags; see `contract.ts`.
 *
 * @module
 */

// First: it switches ONNX Runtime's telemetry off before the library loads.
import "./telemetry.ts";
import * as ort from "onnxruntime-node";
import {
  CUDA_PROVIDER_LIBRARIES,
  ExecutionProviderError,
  explainProviderFailure,
  explainRunFailure,
} from "./providers.ts";
import {
  type CacheRuntime,
  openCachedRewrite as cachedRewrite,
  openThroughCache,
} from "./optimized_cache.ts";
import type {
  ExecutionProvider,
  ExternalDataFile,
  IoMeta,
  SessionIo,
  SessionOptions,
} from "./session_options.ts";
import { sessionThreads } from "./threads.ts";
import { processUsableCores, type UsableCores } from "./usable_cores.ts";

/**
 * Keeps float16 tensor data as `Uint16Array` bit patterns. onnxruntime-common
 * maps "float16" to `Float16Array` when the global exists (its lazy
 * `checkTypedArray` in `tensor-impl-type-mapping.ts`, run at the first tensor
 * construction) and then wraps `Uint16Array` data in a `Float16Array` view;
 * Deno has `Float16Array`, but its N-API does not report it as a typed array,
 * so the Node binding sees 0 bytes ("not enough space: expected 384, got 0").
 * Hiding the global during that first check makes "float16" map to
 * `Uint16Array` for good, for feeds and for outputs.
 */
function pinFloat16ToUint16(): void {
  const g = globalThis as { Float16Array?: unknown };
  const descriptor = Object.getOwnPropertyDescriptor(g, "Float16Array");
  if (descriptor?.configurable) delete g.Float16Array;
  try {
    new ort.Tensor("float16", new Uint16Array(1), [1]);
  } finally {
    if (descriptor?.configurable) Object.defineProperty(g, "Float16Array", descriptor);
  }
}
pinFloat16ToUint16();

/** The constructor type of {@link Tensor}: its `new` overloads and `from*` factories. */
export type TensorConstructor = ort.TensorConstructor;
/** The ONNX Runtime tensor class (`new Tensor("float32", data, dims)`). */
export const Tensor: TensorConstructor = ort.Tensor;
/** An ONNX Runtime tensor. */
export type Tensor = ort.Tensor;

export type {
  ExecutionMode,
  ExecutionProvider,
  ExternalDataFile,
  GraphOptimization,
  IoMeta,
  OutputLocation,
  SessionIo,
  SessionOptions,
} from "./session_options.ts";

/** Feeds of one run, by input name. */
export type Feeds = Record<string, Tensor>;

/** An ORT execution provider entry as the Node binding reports it. */
export interface BackendInfo {
  /** Provider name, e.g. "cpu", "cuda". */
  name: string;
  /** False when its libraries are downloaded by the package install script. */
  bundled: boolean;
}

/**
 * Providers this onnxruntime-node build knows about
 * (`listSupportedBackends` of onnxruntime `js/node/lib/backend.ts`).
 */
export function listBackends(): BackendInfo[] {
  const list = (ort as { listSupportedBackends?: () => BackendInfo[] }).listSupportedBackends;
  if (typeof list !== "function") return [{ name: "cpu", bundled: true }];
  return list().map((b) => ({ name: b.name, bundled: b.bundled }));
}

/** An open inference session with its I/O metadata. */
export class Session implements SessionIo {
  /** Name used in error messages. */
  readonly label: string;
  /** The model's inputs, in graph order. */
  readonly inputs: readonly IoMeta[];
  /** The model's outputs, in graph order. */
  readonly outputs: readonly IoMeta[];
  /** The execution provider the session runs on. */
  readonly provider: ExecutionProvider;
  #session: ort.InferenceSession | null;

  /** Wraps an ORT session; use {@link createSession} instead. */
  constructor(session: ort.InferenceSession, label: string, provider: ExecutionProvider = "cpu") {
    this.#session = session;
    this.label = label;
    this.provider = provider;
    this.inputs = session.inputMetadata.map(toIoMeta);
    this.outputs = session.outputMetadata.map(toIoMeta);
  }

  /**
   * Runs the model. Returns every output (or the ones in `outputNames`).
   * Note: the Node binding runs synchronously inside `setImmediate`, so a long
   * run blocks the event loop (onnxruntime `js/node/lib/backend.ts`).
   */
  async run(feeds: Feeds, outputNames?: readonly string[]): Promise<Record<string, Tensor>> {
    const session = this.#session;
    if (!session) throw new Error(`${this.label}: run after release`);
    try {
      const result = outputNames
        ? await session.run(feeds, [...outputNames])
        : await session.run(feeds);
      return result as Record<string, Tensor>;
    } catch (e) {
      throw new Error(
        `${this.label}: run failed: ${explainRunFailure(this.provider, errorText(e))}`,
        {
          cause: e,
        },
      );
    }
  }

  /** Frees the native session. Safe to call twice. */
  async release(): Promise<void> {
    const session = this.#session;
    this.#session = null;
    if (session) await session.release();
  }
}

/**
 * Opens a model from a file path. External data (`weights.pb`,
 * `model.onnx_data`) is found by ORT next to the file, from the locations
 * recorded in the model.
 */
export async function createSession(path: string, options: SessionOptions = {}): Promise<Session> {
  if (options.optimizedCache !== undefined) {
    return await openThroughCache({ path }, options, CACHE_RUNTIME);
  }
  return await openPath(path, options);
}

/** What the optimised-graph cache opens models with. */
const CACHE_RUNTIME: CacheRuntime<Session> = {
  open: (path, options) => openPath(path, options),
  openBytes: (bytes, externalData, options) => openBytes(bytes, externalData, options),
  release: (session) => session.release(),
  version: `onnxruntime-node ${ort.env.versions.node ?? "?"}, ` +
    `onnxruntime-common ${ort.env.versions.common}`,
};

async function openPath(path: string, options: SessionOptions): Promise<Session> {
  const label = options.label ?? path.split(/[\\/]/).slice(-2).join("/");
  return await open(path, ortSessionOptions(options), label, options.executionProvider ?? "cpu");
}

/**
 * Opens a model from bytes. External data must be passed in memory, under
 * the `location` names the model records (onnxruntime
 * `js/node/src/session_options_helper.cc`, `externalData`).
 */
export async function createSessionFromBytes(
  bytes: Uint8Array,
  externalData: readonly ExternalDataFile[] = [],
  options: SessionOptions = {},
): Promise<Session> {
  if (options.optimizedCache !== undefined && options.readFrom !== undefined) {
    return await openThroughCache(
      { bytes, externalData, from: options.readFrom, rewrite: options.rewrite },
      options,
      CACHE_RUNTIME,
    );
  }
  return await openBytes(bytes, externalData, options);
}

/**
 * The cached optimised graph of `from` rewritten by `rewrite` (what
 * {@link createSessionFromBytes} with `readFrom` and `rewrite` kept at an
 * earlier start), opened without reading or rewriting the file; null when
 * `options.optimizedCache` is unset or nothing current is cached: then
 * rewrite the file and open the bytes.
 */
export async function openCachedRewrite(
  from: string,
  rewrite: string,
  options: SessionOptions,
): Promise<Session | null> {
  return await cachedRewrite({ from, rewrite }, options, CACHE_RUNTIME);
}

async function openBytes(
  bytes: Uint8Array,
  externalData: readonly ExternalDataFile[],
  options: SessionOptions,
): Promise<Session> {
  const ortOptions = ortSessionOptions(options);
  if (externalData.length > 0) {
    (ortOptions as { externalData?: unknown }).externalData = externalData.map((f) => ({
      path: f.path,
      data: f.data,
    }));
  }
  return await open(
    bytes,
    ortOptions,
    options.label ?? "model",
    options.executionProvider ?? "cpu",
  );
}

async function open(
  source: string | Uint8Array,
  ortOptions: ort.InferenceSession.SessionOptions,
  label: string,
  provider: ExecutionProvider,
): Promise<Session> {
  assertProviderKnown(provider);
  let session: ort.InferenceSession;
  try {
    session = typeof source === "string"
      ? await ort.InferenceSession.create(source, ortOptions)
      : await ort.InferenceSession.create(source, ortOptions);
  } catch (e) {
    const context = `${label}: cannot create session`;
    if (provider === "cpu") throw new Error(`${context}: ${errorText(e)}`, { cause: e });
    const why = explainProviderFailure(provider, errorText(e), providerFacts());
    throw new ExecutionProviderError(provider, why, context, { cause: e });
  }
  return new Session(session, label, provider);
}

function assertProviderKnown(provider: ExecutionProvider): void {
  if (!["cpu", "cuda", "webgpu"].includes(provider)) {
    throw new Error(`unknown execution provider \`${provider}\` (expected cpu, cuda or webgpu)`);
  }
  if (provider === "cpu") return;
  const names = listBackends().map((b) => b.name);
  if (!names.includes(provider)) {
    throw new ExecutionProviderError(
      provider,
      `execution provider \`${provider}\` is not available in this onnxruntime-node build ` +
        `(available: ${names.join(", ")}); set [runtime] execution_provider = "cpu" to run on ` +
        "the CPU",
    );
  }
}

/**
 * The folder of the native library (`bin/napi-v6/<platform>/<arch>` of the
 * package), where the install script puts the CUDA provider libraries; null
 * where it cannot be found on disk (a compiled binary).
 */
export function nativeLibraryDir(): string | null {
  try {
    const index = new URL(import.meta.resolve("onnxruntime-node"));
    if (index.protocol !== "file:") return null;
    const root = new URL("../", index); // dist/index.js → the package folder
    const arch = Deno.build.arch === "x86_64" ? "x64" : "arm64";
    return decodeURIComponent(new URL(`bin/napi-v6/${Deno.build.os}/${arch}`, root).pathname);
  } catch {
    return null;
  }
}

function providerFacts(): { cudaLibrariesPresent: boolean | null; libraryDir: string | null } {
  const dir = nativeLibraryDir();
  if (!dir) return { cudaLibrariesPresent: null, libraryDir: null };
  try {
    const present = CUDA_PROVIDER_LIBRARIES.every((f) => {
      try {
        return Deno.statSync(`${dir}/${f}`).isFile;
      } catch (e) {
        if (e instanceof Deno.errors.NotFound) return false;
        throw e;
      }
    });
    return { cudaLibrariesPresent: present, libraryDir: dir };
  } catch {
    return { cudaLibrariesPresent: null, libraryDir: dir };
  }
}

/** Whether `tensor` lives on the device (an output left there by `outputLocations`). */
export function isDeviceTensor(tensor: Tensor): boolean {
  // "cpu-pinned" (CUDA's page-locked host memory) is CPU memory JavaScript can read.
  return tensor.location !== "cpu" && tensor.location !== "cpu-pinned";
}

/**
 * Frees a device tensor's buffer now instead of at garbage collection; CPU
 * tensors are left alone (their memory is JavaScript's). After this the
 * tensor can no longer be fed.
 */
export function releaseDeviceTensor(tensor: Tensor | undefined): void {
  if (tensor && isDeviceTensor(tensor)) tensor.dispose();
}

/**
 * The options handed to `InferenceSession.create` for `options`; thread
 * counts of 0 are resolved against `cores` (this process's by default).
 * Exported for tests.
 */
export function ortSessionOptions(
  options: SessionOptions,
  cores: UsableCores = processUsableCores(),
): ort.InferenceSession.SessionOptions {
  const provider = options.executionProvider ?? "cpu";
  const out: ort.InferenceSession.SessionOptions = {
    executionProviders: [provider],
    graphOptimizationLevel: options.graphOptimization ?? "all",
  };
  const threads = sessionThreads(options, cores);
  out.intraOpNumThreads = threads.intraOp;
  if (threads.interOp > 0) out.interOpNumThreads = threads.interOp;
  // Read by the Node binding (onnxruntime `js/node/src/session_options_helper.cc`).
  if (options.cpuMemArena !== undefined) out.enableCpuMemArena = options.cpuMemArena;
  if (options.memoryPattern !== undefined) out.enableMemPattern = options.memoryPattern;
  if (options.executionMode !== undefined) {
    if (options.executionMode !== "sequential" && options.executionMode !== "parallel") {
      throw new Error(
        `executionMode must be "sequential" or "parallel", got ${options.executionMode}`,
      );
    }
    out.executionMode = options.executionMode;
  }
  const save = options.saveOptimized;
  if (save) {
    out.optimizedModelFilePath = save.path;
    // ONNX Runtime warns that an "all"-level graph is specific to this machine; the cache
    // keys it by the CPU (optimized_cache.ts), so the warning would only be noise at each
    // first start. Errors still throw.
    out.logSeverityLevel = 3;
    // Session config entries (onnxruntime_session_options_config_keys.h), read by the Node
    // binding from `extra` (onnxruntime js/node/src/session_options_helper.cc).
    out.extra = {
      session: {
        optimized_model_external_initializers_file_name: save.externalData,
        optimized_model_external_initializers_min_size_in_bytes: "1024",
        save_external_prepacked_constant_initializers: save.prepacked ? "1" : "0",
      },
    };
  }
  const locations = options.outputLocations;
  if (locations && Object.keys(locations).length > 0) {
    for (const [name, where] of Object.entries(locations)) {
      if (where !== "cpu" && where !== "gpu-buffer") {
        throw new Error(`outputLocations.${name} must be "cpu" or "gpu-buffer", got ${where}`);
      }
      if (where === "gpu-buffer" && provider !== "webgpu") {
        throw new Error(
          `outputLocations.${name} = "gpu-buffer" needs the webgpu execution provider, not ${provider}`,
        );
      }
    }
    out.preferredOutputLocation = { ...locations };
  }
  return out;
}

function toIoMeta(m: ort.InferenceSession.ValueMetadata): IoMeta {
  if (!m.isTensor) return { name: m.name, dtype: "non-tensor", shape: [] };
  return { name: m.name, dtype: m.type, shape: [...m.shape] };
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * The main-thread {@link Generator}: forwards requests to the engine Worker
 * (`worker.ts`) and maps its answers to results and `ToolError`s. The Worker
 * is started by {@link createWorkerGenerator} (so start-up errors surface at
 * server start) and, after a crash or an out-of-memory error, started again
 * lazily by the next request.
 *
 * @module
 */

import { log } from "../log/mod.ts";
import { ToolError } from "../mcp/tool.ts";
import type { EngineInfo } from "./engine.ts";
import type { EngineConfig } from "./engine_config.ts";
import type { FromWorker, ToWorker } from "./worker_protocol.ts";
import type { GenerateOptions, GenerationRequest, GenerationResult, Generator } from "./types.ts";

/** Options of {@link createWorkerGenerator}. */
export interface WorkerGeneratorOptions {
  /** The engine's part of the config. */
  config: EngineConfig;
  /** Worker module; default `./worker.ts` next to this file. */
  workerUrl?: string | URL;
  /** How long {@link Generator.close} waits for the Worker to release its sessions. */
  closeTimeoutMs?: number;
  /** Sees every message from the Worker, including those of aborted requests (logs, tests). */
  onWorkerMessage?: (message: FromWorker) => void;
}

/** A Worker-backed {@link Generator}, with what the Worker loaded. */
export interface WorkerGenerator extends Generator {
  /** What the current Worker loaded (from its `ready` message). */
  readonly info: EngineInfo;
}

interface Pending {
  /** The Worker the request was sent to. */
  running: Running;
  /** The request's cancel flag, shared with the Worker. */
  flag: Int32Array;
  resolve(result: GenerationResult): void;
  reject(error: unknown): void;
  onProgress?: (step: number, total: number) => void;
  cleanup(): void;
}

interface Running {
  worker: Worker;
  ready: Promise<EngineInfo>;
}

/**
 * Starts the engine Worker and waits until every model is loaded. Rejects
 * with the Worker's start-up error (which names the file and the problem).
 */
export async function createWorkerGenerator(
  options: WorkerGeneratorOptions,
): Promise<WorkerGenerator> {
  const generator = new WorkerClient(options);
  await generator.start();
  return generator;
}

class WorkerClient implements WorkerGenerator {
  readonly #options: WorkerGeneratorOptions;
  readonly #pending = new Map<number, Pending>();
  #running: Running | null = null;
  #info: EngineInfo | null = null;
  #nextId = 1;
  #closed = false;

  constructor(options: WorkerGeneratorOptions) {
    this.#options = options;
  }

  get info(): EngineInfo {
    if (!this.#info) throw new Error("the inference worker has not started");
    return this.#info;
  }

  /** Starts the Worker if none is running; resolves when its models are loaded. */
  start(): Promise<EngineInfo> {
    if (this.#running) return this.#running.ready;
    const url = this.#options.workerUrl ?? new URL("./worker.ts", import.meta.url);
    // Workers inherit the parent's permissions by default (Deno 2).
    const worker = new Worker(url, { type: "module" });
    let settle!: { resolve(info: EngineInfo): void; reject(e: unknown): void };
    const ready = new Promise<EngineInfo>((resolve, reject) => settle = { resolve, reject });
    ready.catch(() => {}); // observed by callers; avoid an unhandled rejection here
    const running: Running = { worker, ready };
    let isReady = false;
    worker.onmessage = (event: MessageEvent<FromWorker>) => {
      const message = event.data;
      this.#options.onWorkerMessage?.(message);
      if (message.type === "ready") {
        isReady = true;
        this.#info = message.info;
        settle.resolve(message.info);
      } else if (message.type === "init_error") {
        this.#drop(running, new ToolError("configuration", message.message));
        settle.reject(new Error(message.message));
      } else {
        this.#onMessage(running, message);
      }
    };
    worker.onerror = (event: ErrorEvent) => {
      // Handled here: an unhandled Worker error would terminate the whole process.
      event.preventDefault();
      const text = event.message || String(event.error ?? "unknown error");
      log("error", "pipeline", "inference worker crashed", { message: text });
      this.#drop(running, new ToolError("inference", `the inference worker crashed: ${text}`));
      if (!isReady) settle.reject(new Error(`the inference worker failed to start: ${text}`));
    };
    worker.onmessageerror = () => {
      this.#drop(
        running,
        new ToolError("inference", "the inference worker sent an unreadable message"),
      );
    };
    this.#running = running;
    this.#send(worker, { type: "init", config: this.#options.config });
    return ready;
  }

  async generate(
    request: GenerationRequest,
    options: GenerateOptions = {},
  ): Promise<GenerationResult> {
    if (this.#closed) throw new ToolError("inference", "the generator is closed");
    const { signal } = options;
    signal?.throwIfAborted();
    try {
      await this.start();
    } catch (e) {
      throw new ToolError(
        "configuration",
        `the inference engine could not start: ${(e as Error).message}`,
      );
    }
    signal?.throwIfAborted();
    const running = this.#running!;
    const id = this.#nextId++;
    const cancel = new SharedArrayBuffer(4);
    const flag = new Int32Array(cancel);
    return await new Promise<GenerationResult>((resolve, reject) => {
      const onAbort = () => {
        // The Worker sees the flag at its next step boundary; the caller is told at once.
        Atomics.store(flag, 0, 1);
        const pending = this.#pending.get(id);
        if (!pending) return;
        this.#pending.delete(id);
        pending.cleanup();
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#pending.set(id, {
        running,
        flag,
        resolve,
        reject,
        onProgress: options.onProgress,
        cleanup: () => signal?.removeEventListener("abort", onAbort),
      });
      this.#send(running.worker, { type: "generate", id, request, cancel });
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#rejectAll(new ToolError("inference", "the generator was closed"));
    const running = this.#running;
    this.#running = null;
    if (!running) return;
    const { worker } = running;
    const timeout = this.#options.closeTimeoutMs ?? 10_000;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, timeout);
      worker.onmessage = (event: MessageEvent<FromWorker>) => {
        if (event.data.type === "closed") {
          clearTimeout(timer);
          resolve();
        }
      };
      worker.onerror = (event) => {
        event.preventDefault();
        clearTimeout(timer);
        resolve();
      };
      try {
        this.#send(worker, { type: "close" });
      } catch {
        clearTimeout(timer);
        resolve();
      }
    });
    worker.terminate();
  }

  #send(worker: Worker, message: ToWorker): void {
    worker.postMessage(message);
  }

  #onMessage(running: Running, message: FromWorker): void {
    if (
      message.type === "closed" || message.type === "ready" || message.type === "init_error" ||
      message.type === "warmed_up"
    ) {
      return;
    }
    const pending = this.#pending.get(message.id);
    if (message.type === "progress") {
      try {
        pending?.onProgress?.(message.step, message.total);
      } catch (e) {
        log("warn", "pipeline", "progress callback threw", { message: (e as Error).message });
      }
      return;
    }
    if (!pending) {
      // Aborted earlier: the caller has its answer.
    } else {
      this.#pending.delete(message.id);
      pending.cleanup();
    }
    if (message.type === "error" && message.released) {
      this.#drop(
        running,
        new ToolError(
          "out_of_memory",
          "an earlier generation ran out of memory and the engine was reloaded; try again",
        ),
      );
    }
    if (!pending) return;
    if (message.type === "result") {
      pending.resolve({
        image: message.image,
        notes: message.notes,
        ...(message.embeddingsUsed ? { embeddingsUsed: message.embeddingsUsed } : {}),
      });
    } else if (message.error.category === "cancelled") {
      pending.reject(new DOMException(message.error.message, "AbortError"));
    } else {
      pending.reject(new ToolError(message.error.category, message.error.message));
    }
  }

  /**
   * Terminates a Worker that can no longer serve and rejects what it still
   * owed with `error`; the next request starts a new Worker.
   */
  #drop(running: Running, error: unknown): void {
    if (this.#running === running) this.#running = null;
    running.worker.terminate();
    this.#rejectAll(error, running);
  }

  #rejectAll(error: unknown, running?: Running): void {
    for (const [id, p] of [...this.#pending]) {
      if (running && p.running !== running) continue;
      Atomics.store(p.flag, 0, 1); // a live Worker stops at its next step boundary
      this.#pending.delete(id);
      p.cleanup();
      p.reject(error);
    }
  }
}

/**
 * The engine side of the Worker protocol (`worker_protocol.ts`): keeps one
 * engine, created on `init` and reused for every request, and answers
 * messages one after another in arrival order. `worker.ts` serves the real
 * engine with it; tests serve a wrapped one.
 *
 * @module
 */

import { log } from "../log/mod.ts";
import type { Engine } from "./engine.ts";
import type { EngineConfig } from "./engine_config.ts";
import { classifyError, errorMessage } from "./errors.ts";
import { warmUp } from "./warm_up.ts";
import type { FromWorker, ToWorker } from "./worker_protocol.ts";

/** What the host needs of an engine. */
export type HostedEngine = Pick<Engine, "generate" | "release" | "info">;

/** Creates the engine on `init`; rejects with a start-up error naming the file. */
export type EngineFactory = (config: EngineConfig) => Promise<HostedEngine>;

/** The Worker global as this module uses it. */
interface WorkerScope {
  onmessage: ((event: MessageEvent<ToWorker>) => void) | null;
  postMessage(message: FromWorker, transfer?: Transferable[]): void;
  close(): void;
}

/**
 * Serves the engine protocol on the current Worker global (`self`). Call
 * once, at the top level of a Worker module.
 */
export function serveEngine(factory: EngineFactory): void {
  const scope = self as unknown as WorkerScope;
  let engine: HostedEngine | null = null;
  /** Serializes work: the engine runs one generation at a time. */
  let queue: Promise<void> = Promise.resolve();

  const post = (message: FromWorker, transfer?: Transferable[]): void => {
    scope.postMessage(message, transfer);
  };

  const handle = async (message: ToWorker): Promise<void> => {
    switch (message.type) {
      case "init": {
        try {
          engine = await factory(message.config);
        } catch (e) {
          post({ type: "init_error", message: errorMessage(e) });
          return;
        }
        // Ready first, so the tools are listed as soon as the models are open; the warm-up
        // runs inside this handler, so a request that arrives meanwhile (handled in order,
        // see `queue`) starts right after it, on planned sessions.
        post({ type: "ready", info: engine.info });
        const size = message.config.warmUp;
        if (size) {
          try {
            const ms = await warmUp(engine, size);
            log("info", "pipeline", "warmed up: every session planned for the default size", {
              ms,
              width: size.width,
              height: size.height,
            });
            post({ type: "warmed_up", ms });
          } catch (e) {
            // The first request pays what the warm-up would have; it fails on its own if it must.
            log("warn", "pipeline", "the warm-up image failed", { message: errorMessage(e) });
          }
        }
        return;
      }
      case "generate": {
        const { id, request } = message;
        const flag = new Int32Array(message.cancel);
        if (!engine) {
          post({
            type: "error",
            id,
            error: { category: "inference", message: "the inference engine is not loaded" },
            released: true,
          });
          return;
        }
        try {
          const result = await engine.generate(request, {
            isCancelled: () => Atomics.load(flag, 0) !== 0,
            onProgress: (step, total) => post({ type: "progress", id, step, total }),
          });
          const { image } = result;
          post({
            type: "result",
            id,
            image,
            notes: result.notes,
            ...(result.embeddingsUsed ? { embeddingsUsed: result.embeddingsUsed } : {}),
          }, [
            image.data.buffer as ArrayBuffer,
          ]);
        } catch (e) {
          const error = classifyError(e);
          let released = false;
          if (error.category === "out_of_memory") {
            // Free the sessions (and ORT's arenas with them); the client replaces this Worker.
            log("error", "pipeline", "out of memory; releasing the sessions", { id });
            const dying = engine;
            engine = null;
            await dying?.release().catch(() => {});
            released = true;
          } else if (error.category === "inference") {
            log("warn", "pipeline", "generation failed", { id, message: error.message });
          }
          post({ type: "error", id, error, released });
        }
        return;
      }
      case "close": {
        const dying = engine;
        engine = null;
        await dying?.release().catch(() => {});
        post({ type: "closed" });
        scope.close();
        return;
      }
    }
  };

  scope.onmessage = (event) => {
    const message = event.data;
    queue = queue.then(() => handle(message));
  };
}

/**
 * The diffusion engine behind the {@link Generator} interface: the SD 1.5
 * loop on ONNX Runtime (`engine.ts`), run in a Worker (`worker.ts`) through
 * a main-thread client (`worker_client.ts`).
 *
 * @module
 */

import type { ResolvedConfig } from "../config/resolve.ts";
import { engineConfigOf, type MergedModels } from "./engine_config.ts";
import type { Generator } from "./types.ts";
import { createWorkerGenerator } from "./worker_client.ts";

export * from "./types.ts";
export {
  createEngine,
  Engine,
  type EngineInfo,
  type EngineOptions,
  type EngineRunOptions,
} from "./engine.ts";
export {
  basePaths,
  type EngineConfig,
  engineConfigOf,
  type EnginePrompt,
  type GenerationSettings,
  type MergedModels,
} from "./engine_config.ts";
export type { EngineEmbedding } from "./text_encoder_open.ts";
export {
  CancelledError,
  type ClassifiedError,
  classifyError,
  type ErrorCategory,
  isOutOfMemory,
} from "./errors.ts";
export type {
  BytesOpener,
  ModelBytes,
  ModelSession,
  RewriteCacheOpener,
  SessionOpener,
} from "./model_session.ts";
export { type DeferredGenerator, deferredGenerator } from "./deferred_generator.ts";
export type { ControlNetKind } from "./load_models.ts";
export { type EngineFactory, type HostedEngine, serveEngine } from "./worker_host.ts";
export type { FromWorker, ToWorker } from "./worker_protocol.ts";
export {
  createWorkerGenerator,
  type WorkerGenerator,
  type WorkerGeneratorOptions,
} from "./worker_client.ts";

/**
 * The production generator: a Worker that loads every model `config` needs
 * (checked against the I/O contract) and runs generations off the main
 * thread. Rejects with an Error naming the model file and the problem when
 * start-up fails.
 */
export async function createGenerator(
  config: ResolvedConfig,
  merged?: MergedModels,
): Promise<Generator> {
  return await createWorkerGenerator({ config: engineConfigOf(config, merged) });
}

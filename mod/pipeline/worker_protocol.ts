/**
 * Messages between the main thread ({@link ../worker_client.ts}) and the
 * engine Worker (`worker.ts`). Everything here is structured-clone data.
 *
 * @module
 */

import type { EngineInfo } from "./engine.ts";
import type { EngineConfig } from "./engine_config.ts";
import type { ClassifiedError } from "./errors.ts";
import type { EmbeddingUse, GenerationRequest, RgbImage } from "./types.ts";

/** Main thread → Worker. */
export type ToWorker =
  /** Load every model once; answered by `ready` or `init_error`. */
  | { type: "init"; config: EngineConfig }
  /**
   * Run one generation. `cancel` holds one Int32: non-zero = stop at the next
   * step boundary. A shared flag because the Worker's event loop is blocked
   * while ONNX Runtime runs (onnxruntime `js/node/lib/backend.ts` runs
   * synchronously), so a posted "cancel" message would be read only after
   * the whole generation.
   */
  | { type: "generate"; id: number; request: GenerationRequest; cancel: SharedArrayBuffer }
  /** Release the sessions; answered by `closed`. */
  | { type: "close" };

/** Worker → main thread. */
export type FromWorker =
  /** The models are loaded; a configured warm-up runs next, before any request. */
  | { type: "ready"; info: EngineInfo }
  /** The warm-up image is made, in `ms` milliseconds (requests posted meanwhile ran after it). */
  | { type: "warmed_up"; ms: number }
  | { type: "init_error"; message: string }
  | { type: "progress"; id: number; step: number; total: number }
  | {
    type: "result";
    id: number;
    image: RgbImage;
    notes: string[];
    /** {@link GenerationResult.embeddingsUsed}. */
    embeddingsUsed?: EmbeddingUse[];
  }
  /**
   * A failed generation. `released`: the Worker freed its sessions (after an
   * out-of-memory error) and must be replaced before the next request.
   */
  | { type: "error"; id: number; error: ClassifiedError; released: boolean }
  | { type: "closed" };

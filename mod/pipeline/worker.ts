/**
 * The engine Worker (a Deno module Worker): owns the ONNX sessions, created
 * once on `init` and reused for every request, so the main thread keeps
 * serving HTTP, `tools/list` and authentication while a generation runs.
 * See `worker_host.ts` and `worker_protocol.ts`.
 *
 * @module
 */

import { createEngine } from "./engine.ts";
import { serveEngine } from "./worker_host.ts";

serveEngine(createEngine);

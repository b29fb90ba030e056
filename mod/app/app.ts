/**
 * Wires a resolved configuration into a running server: model check, engine,
 * queue, tools, and the chosen transport (stdio, or HTTP with API keys).
 *
 * @module
 */

import { authFailureResponse, createAuthenticator } from "../auth/mod.ts";
import type { ResolvedConfig } from "../config/mod.ts";
import { openDatabase } from "../db/mod.ts";
import { ImageService } from "../generation/mod.ts";
import { type HttpServerHandle, startHttpServer } from "../http/mod.ts";
import { log } from "../log/mod.ts";
import { verifyConfiguredModels } from "../models/mod.ts";
import { createMcpServer, DenoStdioTransport } from "../mcp/mod.ts";
import { createGenerator, deferredGenerator } from "../pipeline/mod.ts";
import type { Generator } from "../pipeline/types.ts";
import { GenerationQueue } from "../queue/mod.ts";
import { createTools } from "../../tools/mod.ts";

/** A running server. */
export interface App {
  /** The HTTP address, when serving HTTP. */
  http?: Deno.NetAddr;
  /** Resolves when the server stops on its own (stdin closed, or after {@link App.shutdown}). */
  finished: Promise<void>;
  /** Stops accepting work, lets the running generation finish (bounded), releases everything. */
  shutdown(): Promise<void>;
}

/** Test seams: replace the engine. */
export interface AppOverrides {
  /**
   * Used instead of loading the ONNX engine from the configured model files;
   * a promise stands for an engine still starting (a rejection is a failed start).
   */
  generator?: Generator | Promise<Generator>;
}

const INSTRUCTIONS = "Local Stable Diffusion 1.5 image generation. generate_image makes an image " +
  "from a prompt; generate_guided_image follows the depth or pose of an input image; " +
  "inpaint_image repaints the white area of a mask. Images are 512x512, 512x384 or 384x512 PNGs. " +
  "Generations run one at a time; each takes seconds to minutes.";

/** Checks the model files against models.lock, then starts the engine. */
async function loadEngine(config: ResolvedConfig): Promise<Generator> {
  await verifyConfiguredModels(config);
  return await createGenerator(config);
}

/**
 * Starts the server described by `config`. The transport answers at once
 * while the models are checked and loaded; `tools/list` and `tools/call`
 * wait for them. A failed start closes the transport and rejects
 * {@link App.finished} with its error (before any tool was listed).
 */
export async function startApp(config: ResolvedConfig, overrides: AppOverrides = {}): Promise<App> {
  const generator = deferredGenerator(Promise.resolve(overrides.generator ?? loadEngine(config)));
  const ready = generator.ready;
  ready.then(() => log("info", "app", "models loaded; tools available"), () => {});
  const queue = new GenerationQueue(config.generation.queueLimit);
  const images = new ImageService({
    generator,
    queue,
    prompt: config.prompt,
    defaultSize: config.generation.defaultSize,
    seed: config.generation.seed,
    output: config.output,
  });
  const tools = createTools(config, images);
  const grace = config.server.shutdownGraceMs;
  let resolveFinished!: () => void;
  let rejectFinished!: (error: unknown) => void;
  const finished = new Promise<void>((resolve, reject) => {
    resolveFinished = resolve;
    rejectFinished = reject;
  });
  let stopping: Promise<void> | undefined;
  /** Ends {@link App.finished}: with the start-up error when the engine never started. */
  const settleFinished = () => ready.then(resolveFinished, (error) => rejectFinished(error));

  // One deadline for the whole shutdown: stop taking work, let what runs finish.
  let deadline = Infinity;
  const remaining = () => Math.max(0, deadline - Date.now());
  const beginShutdown = () => {
    deadline = Math.min(deadline, Date.now() + grace);
    queue.close("the server is shutting down; no new generations are accepted");
  };
  /** Waits for `done` until the shutdown deadline; false when the deadline came first. */
  const bounded = async (done: Promise<void>): Promise<boolean> => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const expired = new Promise<boolean>((r) => timer = setTimeout(() => r(false), remaining()));
    const finished = await Promise.race([done.then(() => true), expired]);
    clearTimeout(timer);
    return finished;
  };
  const drain = async () => {
    if (!await bounded(queue.idle())) {
      log("warn", "app", `generations did not finish within ${grace} ms`);
    }
  };

  if (config.server.transport === "stdio") {
    const server = createMcpServer({ tools, instructions: INSTRUCTIONS, ready });
    const transport = new DenoStdioTransport();
    const shutdown = () =>
      stopping ??= (async () => {
        // Calls received while the engine was starting wait for it: let them reach the queue.
        deadline = Date.now() + grace;
        await bounded(ready.catch(() => {}));
        await new Promise((r) => setTimeout(r, 0));
        beginShutdown();
        // Calls already received may not have reached the queue yet: wait for their replies.
        await bounded(transport.settled());
        await drain();
        await server.close().catch(() => {});
        await generator.close();
        await settleFinished();
      })();
    // End of stdin: answer what is running, then stop (a piped client closes
    // stdin right after sending its calls).
    transport.oninputend = () => void shutdown();
    transport.onclose = () => void shutdown();
    ready.catch(() => void shutdown());
    await server.connect(transport);
    log("info", "app", `serving over stdio; ${tools.length} tools once the models are loaded`);
    return { finished, shutdown };
  }

  const db = await openDatabase({
    url: config.auth.databaseUrl,
    embeddedDir: `${config.server.dataDir}/pglite`,
  });
  const authenticator = createAuthenticator({
    db,
    environment: config.server.environment,
    cloudfrontSecret: config.auth.cloudfrontSecret,
    cacheTtlMs: config.auth.cacheTtlMs,
    lastUsedIntervalMs: config.auth.lastUsedIntervalMs,
    dbTimeoutMs: config.auth.dbTimeoutMs,
  });
  let http: HttpServerHandle;
  try {
    http = await startHttpServer({
      hostname: config.server.host,
      port: config.server.port,
      allowedOrigins: config.server.allowedOrigins,
      authenticator,
      authFailureResponse,
      createServer: (scope) => createMcpServer({ tools, scope, instructions: INSTRUCTIONS, ready }),
      health: () => ({ queue: queue.stats(), tools: tools.length }),
    });
  } catch (error) {
    await authenticator.close();
    await db.close();
    await generator.close();
    throw error;
  }
  const shutdown = () =>
    stopping ??= (async () => {
      await http.shutdown(grace);
      await drain();
      await authenticator.close();
      await db.close();
      await generator.close();
      await settleFinished();
    })();
  ready.catch(() => void shutdown());
  return { http: http.addr, finished, shutdown };
}

/**
 * Wires a resolved configuration into a running server: model check, engine,
 * job store and queue, tools, and the chosen transport (stdio with jobs in
 * memory, or HTTP with API keys and jobs in PostgreSQL).
 *
 * @module
 */

import { GALLERY_RESOURCE, MCP_APPS_EXTENSION } from "../apps/mod.ts";
import { authFailureResponse, createAuthenticator } from "../auth/mod.ts";
import { type ResolvedConfig, samplingSummary, samplingText } from "../config/mod.ts";
import { type Database, openDatabase, probeDatabase } from "../db/mod.ts";
import { checkImageRequest, ImageService, runImageRequest } from "../generation/mod.ts";
import { holdSpareDecoders } from "../image/mod.ts";
import {
  gatherHealth,
  type HttpServerHandle,
  startHealthServer,
  startHttpServer,
} from "../http/mod.ts";
import {
  createJobImageTemplate,
  JobService,
  type JobStore,
  JobTasks,
  MemoryJobStore,
  PostgresJobStore,
  queueShares,
  replicaApplicationName,
} from "../jobs/mod.ts";
import { log } from "../log/mod.ts";
import { sessionThreads } from "../onnx/mod.ts";
import { prepareMergedModels, untilAborted, verifyConfiguredModels } from "../models/mod.ts";
import {
  createMcpServer,
  DenoStdioTransport,
  serveStdioConnection,
  watchParent,
} from "../mcp/mod.ts";
import { createGenerator, deferredGenerator } from "../pipeline/mod.ts";
import type { Generator } from "../pipeline/types.ts";
import { createTools } from "../../tools/mod.ts";

/** The tools whose call queues a generation (and so can be refused by a full queue). */
const IMAGE_TOOLS: ReadonlySet<string> = new Set([
  "generate_image",
  "generate_guided_image",
  "transform_image",
  "upscale_image",
  "inpaint_image",
]);

/** A running server. */
export interface App {
  /** The HTTP address, when serving HTTP. */
  http?: Deno.NetAddr;
  /** Resolves when the server stops on its own (stdin closed, or after {@link App.shutdown}). */
  finished: Promise<void>;
  /** Resolves once the models are loaded (the tools are usable); rejects with the start-up error. */
  ready: Promise<void>;
  /** Stops accepting work, lets the running generation finish (bounded), releases everything. */
  shutdown(): Promise<void>;
}

/** Options of {@link startApp}: a start-up stop, and test seams. */
export interface AppOverrides {
  /**
   * A stop asked for while the models load (SIGTERM, SIGINT): the load is
   * abandoned at once — a derived build or merge in progress leaves no
   * folder behind (`mod/models/unfinished.ts`), an engine still opening its
   * sessions is closed when it is up — and the server shuts down, rejecting
   * {@link App.finished} with the signal's reason.
   */
  signal?: AbortSignal;
  /**
   * Used instead of loading the ONNX engine from the configured model files;
   * a promise stands for an engine still starting (a rejection is a failed start).
   */
  generator?: Generator | Promise<Generator>;
}

/**
 * The server's instructions (`initialize`, `server/discover`): what the tools
 * do, and how a prompt is read under `[prompt] syntax`.
 */
export function serverInstructions(syntax: "a1111" | "plain"): string {
  return INSTRUCTIONS + " " + (syntax === "a1111" ? PROMPTS_A1111 : PROMPTS_PLAIN);
}

const PROMPTS_A1111 = "Prompts are read as AUTOMATIC1111 reads them: (word:1.3), (word) and " +
  "[word] weigh words, BREAK starts a new 75-token chunk, and a prompt is never cut below the " +
  "10,000-character limit.";
const PROMPTS_PLAIN = "Prompts are read as plain text and cut at 77 CLIP tokens (about 55 " +
  "words); the result says when a prompt was cut.";

const INSTRUCTIONS = "Local Stable Diffusion 1.5 image generation. generate_image makes an image " +
  "from a prompt; generate_guided_image follows the depth or pose of an input image; " +
  "inpaint_image repaints the white area of a mask; transform_image redraws an image as the " +
  "prompt describes; upscale_image enlarges one 2x and adds detail. Images are 512x512, 512x384 " +
  "or 384x512 PNGs (1024x1024, 1024x768 or 768x1024 when upscaled). " +
  "Generations run one at a time; each takes seconds to minutes. When one takes longer than " +
  "the server waits, the tool answers with a job_id: call get_generation with it for the " +
  "images (cancel_generation stops it, list_generations lists your jobs).";

/**
 * How long a stdio server waits for cancelled work to stop once nobody can
 * fetch it (the client is gone, or closed its input and every call is answered).
 */
const CLIENT_GONE_GRACE_MS = 5000;

/**
 * Checks the model files against models.lock (building derived ones that are
 * missing or stale), takes the LoRA-merged models from their cache (merging
 * once when it has none), then starts the engine. When `signal` aborts it
 * rejects at once: what cannot be interrupted (hashing a file, ONNX Runtime
 * creating a session in the Worker) goes on unobserved until the process
 * exits, and an engine that comes up after all is closed.
 */
async function loadEngine(config: ResolvedConfig, signal?: AbortSignal): Promise<Generator> {
  const loading = (async () => {
    await verifyConfiguredModels(config, { signal });
    const merged = await prepareMergedModels(config, { signal });
    signal?.throwIfAborted();
    log("info", "app", "model files in place; opening them in the inference worker");
    return await createGenerator(config, merged);
  })();
  // An engine abandoned by the stop is closed once it is up; one already handed over is the app's.
  let handedOver = false;
  signal?.addEventListener("abort", () => {
    if (!handedOver) void loading.then((g) => g.close(), () => {});
  }, { once: true });
  const generator = await untilAborted(loading, signal);
  handedOver = true;
  return generator;
}

/** The engine of a `front` replica: it loads no models and never runs a job. */
const NO_ENGINE: Generator = {
  generate: () =>
    Promise.reject(new Error("this replica is a front (server.role): it runs no jobs")),
  close: () => Promise.resolve(),
};

/**
 * Starts the server described by `config`. The transport answers at once
 * while the models are checked and loaded; `tools/list` and `tools/call`
 * wait for them. A failed start closes the transport and rejects
 * {@link App.finished} with its error (before any tool was listed).
 */
export async function startApp(config: ResolvedConfig, overrides: AppOverrides = {}): Promise<App> {
  const role = config.server.role;
  // One name per process: its claims, its notifications, its connections' application_name.
  const replica = `${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`;
  // A front replica loads no models: its jobs run on the replicas that have an engine.
  const engine: Generator | Promise<Generator> = role === "front"
    ? NO_ENGINE
    : overrides.generator ?? loadEngine(config, overrides.signal);
  // The transport answers while the models load; tools wait for `ready`.
  const generator = deferredGenerator(Promise.resolve(engine));
  const ready = generator.ready;
  ready.then(() => log("info", "app", "models loaded; tools available"), () => {});
  const sampling = samplingSummary(config);
  // What the engine's sessions compute on: intra_op_threads = 0 is the cores this process may use.
  const threads = sessionThreads(config.runtime);
  const runtime = {
    executionProvider: config.runtime.executionProvider,
    intraOpThreads: threads.intraOp,
    interOpThreads: threads.interOp,
    usableCores: threads.usableCores.count,
  };
  log("info", "app", `generation: ${samplingText(sampling)}`, {
    preset: sampling.preset,
    chosen_by: sampling.chosenBy === "auto"
      ? `preset = "auto" on the ${config.runtime.executionProvider} provider`
      : "the config",
    base: config.models.base,
    hint: sampling.preset === "fast"
      ? 'preset = "quality" for full detail (PNDM, 25 steps, CFG, full VAE; minutes per image on a CPU)'
      : sampling.preset === "quality" && config.runtime.executionProvider === "cpu"
      ? 'preset = "fast" for about 30 s per image on 2 cores (LCM, 4 steps, tiny VAE)'
      : undefined,
  });
  const images = new ImageService({
    sampling,
    generator,
    prompt: config.prompt,
    defaultSize: config.generation.defaultSize,
    seed: config.generation.seed,
    output: config.output,
    strengths: { transform: config.transform, upscale: config.upscale.strength },
  });
  // Input images decode in processes of their own; once one is decoded, two wait started
  // (a call's image and mask), so calls do not wait for a process to start.
  const releaseDecoders = holdSpareDecoders(2);
  const limits = {
    queueLimit: config.generation.queueLimit,
    resultTtlMs: config.jobs.resultTtlMs,
    maxResultBytes: config.jobs.maxResultBytes,
  };
  // HTTP keeps jobs in the API keys' database, so they outlive a restart; stdio in memory.
  let db: Database | undefined;
  let store: JobStore;
  if (config.server.transport === "stdio") {
    // One owner (this process's client): only the global limits apply.
    store = new MemoryJobStore(limits);
  } else {
    try {
      db = await openDatabase({
        url: config.auth.databaseUrl,
        embeddedDir: `${config.server.dataDir}/postgres`,
        applicationName: replicaApplicationName(replica),
        // No statement waits for ever on a stalled database (docs/database.md); those a
        // client waits on (key lookups, /healthz) have db_timeout_ms of their own.
        queryTimeoutMs: Math.max(config.auth.dbTimeoutMs, config.jobs.leaseMs),
      });
    } catch (error) {
      await generator.close();
      throw error;
    }
    // Many tenants: what one key, and one project, may hold is bounded too.
    const perOwner = {
      perKey: config.jobs.perKey,
      perProject: config.jobs.perProject,
      queueShares: queueShares(
        config.generation.queueShare.perKey,
        config.generation.queueShare.perProject,
      ),
    };
    store = new PostgresJobStore(db, { ...limits, perOwner }, {
      replica,
      leaseMs: config.jobs.leaseMs,
    });
  }
  const jobs = new JobService({
    store,
    execute: (job, hooks) => runImageRequest(images, job.request, hooks),
    checkRequest: (request) => checkImageRequest(request, { maxCount: config.generation.maxCount }),
    maxWaitMs: config.generation.maxWaitMs,
    resultTtlSeconds: config.jobs.resultTtlMs / 1000,
    queueLimit: config.generation.queueLimit,
    stepsPerImage: config.generation.steps,
    // A front's jobs run on workers, which may run another preset (a GPU's quality).
    sampling: role !== "front" ? samplingText(sampling) : undefined,
    worker: replica,
    engine: role !== "front",
    leaseMs: config.jobs.leaseMs,
  });
  try {
    await jobs.start();
  } catch (error) {
    await db?.close();
    await generator.close();
    throw error;
  }
  const tools = createTools(config, images, jobs);
  // MCP Apps: the gallery view of the image and job tools' results (tool results stay as they are).
  const views = { resources: [GALLERY_RESOURCE], extensions: [MCP_APPS_EXTENSION] };
  // A result too large for clients links each full PNG as a resource of its job.
  const templates = [createJobImageTemplate(jobs.store, config.jobs.resultTtlMs / 1000)];
  // Every server instance, of either era and transport: the same tools, views, job images and
  // tasks (jobs).
  const served = {
    tools,
    ...views,
    templates,
    tasks: new JobTasks(jobs),
    instructions: serverInstructions(config.prompt.syntax),
    ready,
  };
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
  let stopped: Promise<void> = Promise.resolve();
  const beginShutdown = () => {
    deadline = Math.min(deadline, Date.now() + grace);
    // In memory, queued jobs would be lost: they run before the process ends.
    // In PostgreSQL they stay queued for the next start.
    stopped = jobs.close(
      "the server is shutting down; no new generations are accepted",
      store.kind === "memory",
    );
  };
  /** Re-arm the running {@link bounded} waits after the deadline moved closer. */
  const rearms = new Set<() => void>();
  /** Waits for `done` until the shutdown deadline; false when the deadline came first. */
  const bounded = async (done: Promise<void>): Promise<boolean> => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let arm!: () => void;
    const expired = new Promise<boolean>((r) => {
      arm = () => {
        clearTimeout(timer);
        timer = setTimeout(() => r(false), remaining());
      };
      arm();
    });
    rearms.add(arm);
    const finished = await Promise.race([done.then(() => true), expired]);
    clearTimeout(timer);
    rearms.delete(arm);
    return finished;
  };
  const drain = async () => {
    if (!await bounded(stopped)) {
      log("warn", "app", `generations did not finish within ${grace} ms; stopping the running one`);
      jobs.abortRunning();
      await stopped;
    }
    await jobs.dispose();
    await releaseDecoders();
  };

  if (config.server.transport === "stdio") {
    const transport = new DenoStdioTransport();
    // The SDK owns the connection: the opening message picks the era, one server serves it.
    // Reading starts now; every callback below is in place before the first read completes.
    const connection = serveStdioConnection(
      (era) => createMcpServer({ ...served, era }),
      transport,
    );
    /** stdin ended or the client is gone: no call can follow, so no hand-off can be fetched. */
    let unreachable = false;
    /** Cancels this process's jobs that nobody can fetch (with `keepWatched`, open calls' are kept). */
    const cancelUnreachable = async (keepWatched: boolean) => {
      try {
        const ids = await jobs.cancelOwn(keepWatched);
        if (ids.length) log("info", "app", "cancelled generations nobody can fetch", { jobs: ids });
      } catch (error) {
        log("warn", "app", "could not cancel generations", { error: String(error) });
      }
    };
    const shutdown = () =>
      stopping ??= (async () => {
        // Calls received while the engine was starting wait for it: let them reach the queue.
        deadline = Math.min(deadline, Date.now() + grace);
        await bounded(ready.catch(() => {}));
        await new Promise((r) => setTimeout(r, 0));
        beginShutdown();
        // Calls already received may not have reached the queue yet: wait for their replies.
        await bounded(transport.settled());
        if (unreachable) {
          // Every call is answered and none can follow: what is left can never be fetched.
          await cancelUnreachable(false);
          deadline = Math.min(deadline, Date.now() + CLIENT_GONE_GRACE_MS);
          for (const arm of rearms) arm();
        }
        await drain();
        await connection.close().catch(() => {});
        parentWatch.stop();
        await generator.close();
        await settleFinished();
      })();
    // A client that is gone (stdout unwritable, or the parent process dead)
    // reads no answers: cancel its work now and exit within seconds instead
    // of holding the model for the whole grace. Closing the server aborts
    // every running handler, and with it the generation (mod/mcp/stdio.ts).
    const clientGone = (reason: string) => {
      if (abandoned) return;
      abandoned = true;
      unreachable = true;
      log("warn", "app", `the stdio client is gone (${reason}); cancelling its work and exiting`);
      deadline = Math.min(deadline, Date.now() + CLIENT_GONE_GRACE_MS);
      for (const arm of rearms) arm();
      parentWatch.stop();
      // Its jobs, handed off or not: nobody will fetch them.
      void cancelUnreachable(false);
      void connection.close().catch(() => {});
      void shutdown();
    };
    let abandoned = false;
    transport.onclientgone = clientGone;
    const parentWatch = watchParent((was, now) =>
      clientGone(`parent process ${was} exited; now ${now}`)
    );
    // End of stdin: answer the calls still open, then stop (a piped client
    // closes stdin right after sending its calls). No call can follow, so a
    // hand-off could never be fetched: open calls wait for their images
    // (within the shutdown grace), and every other job of this process is
    // cancelled at once; with no call open it exits within seconds. A crashed
    // client closes stdin too; a ping then finds out at once whether anyone
    // still reads stdout.
    transport.oninputend = () => {
      unreachable = true;
      jobs.waitUntilDone();
      void cancelUnreachable(true);
      if (transport.openRequests > 0) transport.probe();
      void shutdown();
    };
    const sdkOnClose = transport.onclose;
    transport.onclose = () => {
      sdkOnClose?.();
      void shutdown();
    };
    ready.catch(() => void shutdown());
    log("info", "app", `serving over stdio; ${tools.length} tools once the models are loaded`);
    return { finished, ready, shutdown };
  }

  const authenticator = createAuthenticator({
    db: db!,
    environment: config.server.environment,
    cloudfrontSecret: config.auth.cloudfrontSecret,
    cacheTtlMs: config.auth.cacheTtlMs,
    lastUsedIntervalMs: config.auth.lastUsedIntervalMs,
    dbTimeoutMs: config.auth.dbTimeoutMs,
    maxConcurrentScrypt: config.auth.scryptConcurrency,
    verifyQueueLimit: config.auth.verifyQueueLimit,
    failuresPerMinute: config.auth.failuresPerMinute,
    unknownPrefixCacheMs: config.auth.unknownPrefixCacheMs,
  });
  // Where either HTTP face listens, with the connection guard's limits.
  const listen = {
    hostname: config.server.host,
    port: config.server.port,
    limits: {
      headerTimeoutMs: config.server.headerTimeoutMs,
      bodyMinBytesPerSecond: config.server.bodyMinBytesPerSecond,
      idleTimeoutMs: config.server.idleTimeoutMs,
      maxConnections: config.server.maxConnections,
      maxConnectionsPerClient: config.server.maxConnectionsPerClient,
      clientConnectionsPerSecond: config.server.clientConnectionsPerSecond,
      maxPendingHeads: config.server.maxPendingHeads,
    },
    trustedProxies: config.server.trustedProxies,
    forwardedHeader: config.server.forwardedHeader,
  };
  // Every database read of /healthz is bounded, so it answers within db_timeout_ms even
  // while the database is stalled (it answers 503 then).
  const dbTimeoutMs = config.auth.dbTimeoutMs;
  const health = (fields: () => Promise<Record<string, unknown>>) => () =>
    gatherHealth({ timeoutMs: dbTimeoutMs, probe: () => probeDatabase(db!, dbTimeoutMs), fields });
  let http: HttpServerHandle;
  try {
    // Stopped while the database opened: never start listening.
    overrides.signal?.throwIfAborted();
    http = role === "worker"
      ? await startHealthServer({
        ...listen,
        health: health(async () => ({
          role,
          ...(await jobs.health(dbTimeoutMs)),
          generation: sampling,
          runtime,
        })),
      })
      : await startHttpServer({
        ...listen,
        allowedOrigins: config.server.allowedOrigins,
        authenticator,
        authFailureResponse,
        createServer: (scope, call) =>
          createMcpServer({
            ...served,
            scope,
            era: call.era,
            protocolVersion: call.protocolVersion,
            cancelled: call.cancelled,
          }),
        health: health(async () => ({
          ...(await jobs.health(dbTimeoutMs)),
          tools: tools.length,
          role,
          // A front runs no job: its workers' /healthz say which preset they run.
          ...(role !== "front" ? { generation: sampling, runtime } : {}),
        })),
        maxRequestsPerKey: config.server.maxRequestsPerKey,
        // A cancellation for a request open at another replica travels through PostgreSQL.
        onCancelElsewhere: (owner, id) => store.cancelRequestElsewhere?.(owner, id),
        // Only the tools that queue a generation can meet a full queue.
        queueRefuses: (scope, tool) =>
          IMAGE_TOOLS.has(tool) ? jobs.queueRefuses(scope) : Promise.resolve(false),
      });
    store.onRequestCancel?.((owner, id) => http.cancelRequest(owner, id));
  } catch (error) {
    beginShutdown();
    await drain();
    await authenticator.close();
    await db!.close();
    await generator.close();
    throw error;
  }
  const shutdown = () =>
    stopping ??= (async () => {
      // The queue closes first, so a request that slips in while the listener
      // stops is refused instead of queued; one deadline bounds every wait.
      beginShutdown();
      await http.shutdown(remaining());
      await drain();
      await authenticator.close();
      await db!.close();
      await generator.close();
      await settleFinished();
    })();
  ready.catch(() => void shutdown());
  log("info", "app", `replica ${replica} serving as ${role}`, { queue: store.kind });
  return { http: http.addr, finished, ready, shutdown };
}

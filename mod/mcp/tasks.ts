/**
 * Long tool calls as tasks: the client gets a handle at once and polls for
 * the result, instead of holding a request open for minutes. Both eras are
 * served from one {@link TaskBackend} (the job store: a task IS a
 * generation job, with its owner, TTL and cancellation):
 *
 * - 2026-07-28, the `io.modelcontextprotocol/tasks` extension (SEP-2663,
 *   https://github.com/modelcontextprotocol/modelcontextprotocol
 *   seps/2663-tasks-extension.md): advertised in `server/discover`; the
 *   server decides per request (here: a call of a tool with
 *   `execution.taskSupport` from a client whose request declares the
 *   extension becomes a task); `tools/call` answers `resultType: "task"`,
 *   `tasks/get` carries progress in `statusMessage` and, once done, the
 *   result exactly as `tools/call` would have returned it; `tasks/cancel`
 *   and `tasks/update` are acknowledgements.
 * - 2025-11-25 tasks (docs/specification/2025-11-25/basic/utilities/tasks):
 *   `capabilities.tasks.requests.tools.call`, `execution.taskSupport` on the
 *   tools, and a client that sends `params.task`; `tasks/get`,
 *   `tasks/result` (blocks until the end), `tasks/list` and `tasks/cancel`
 *   (answers once the task is cancelled).
 *
 * Every task request is checked against the caller: a task is visible to
 * the API key that made it and the keys of its project, and only its key
 * may cancel it (over stdio, to this process's client).
 *
 * @module
 */

import { z } from "zod";
import {
  CLIENT_CAPABILITIES_KEY,
  type McpHandlerContext,
  type McpServer,
  MissingRequiredClientCapabilityError,
  ProtocolError,
  ProtocolErrorCode,
} from "./sdk.ts";
import type { Scope, StartedTask, ToolResult } from "./tool.ts";

/** The extension identifier of 2026-07-28 tasks. */
export const TASKS_EXTENSION_ID = "io.modelcontextprotocol/tasks";

/**
 * The polling interval suggested to clients (`pollIntervalMs` / 2025's
 * `pollInterval`): a sampler step takes 0.1 s (a GPU) to 20 s (a slow CPU),
 * an image from about one second, so a client learns of the end within a
 * second at the cost of one store read per second per task.
 */
export const TASK_POLL_INTERVAL_MS = 1000;

/** Where a task is, as the backend reports it (the era decides the wire status). */
export type TaskState =
  /** Queued or running. */
  | "working"
  /** Ended with a result that is not a tool error. */
  | "completed"
  /** Ended with a tool error (`isError: true`). */
  | "failed"
  /** Cancelled: stopped before or between steps. */
  | "cancelled";

/** A task as the backend reports it. */
export interface TaskView {
  /** The task id (the job id). */
  id: string;
  /** Where it is. */
  state: TaskState;
  /** Progress or outcome in a sentence (queue position, step, estimate). */
  statusMessage?: string;
  /** When it was created. */
  createdAt: Date;
  /** When its state last changed. */
  updatedAt: Date;
  /** Milliseconds from creation it is kept for (at least a minute after it ends); null: not set. */
  ttlMs: number | null;
  /** Once it ended: exactly what the `tools/call` would have returned. */
  result?: ToolResult;
}

/** What {@link TaskBackend.cancel} did. */
export type TaskCancelOutcome =
  /** The task is cancelled, or stops at its next step. */
  | "requested"
  /** It had already ended. */
  | "ended"
  /** The caller may see it but not cancel it (another key of its project made it). */
  | "not_owner"
  /** No such task for this caller. */
  | "not_found";

/** The task store, as the protocol sees it (implemented by the job store's adapter). */
export interface TaskBackend {
  /** The task when `scope` may see it, else null. */
  get(id: string, scope: Scope | undefined): Promise<TaskView | null>;
  /** Waits until the task ended (or `signal` aborts); null when `scope` may not see it. */
  untilDone(id: string, scope: Scope | undefined, signal: AbortSignal): Promise<TaskView | null>;
  /**
   * Cancels the task; with `settle`, resolves once it stopped (bounded), and
   * `task` is its state then.
   */
  cancel(
    id: string,
    scope: Scope | undefined,
    settle: boolean,
  ): Promise<{ outcome: TaskCancelOutcome; task?: TaskView }>;
  /**
   * The tasks `scope` may see, newest first, at most `limit`, from `cursor`
   * (a `nextCursor` of an earlier page) on; `nextCursor` is set when more
   * follow. Null when `cursor` is not one this backend issued.
   */
  list(
    scope: Scope | undefined,
    limit: number,
    cursor?: string,
  ): Promise<{ tasks: TaskView[]; nextCursor?: string } | null>;
}

/** Which protocol era an instance serves. */
export type ProtocolEra = "legacy" | "modern";

/** 2025-11-25 `capabilities.tasks`: task-augmented `tools/call`, `tasks/list`, `tasks/cancel`. */
export const LEGACY_TASK_CAPABILITIES: Readonly<Record<string, unknown>> = {
  list: {},
  cancel: {},
  requests: { tools: { call: {} } },
};

/** The most tasks one `tasks/list` page returns (newest first; `nextCursor` leads to older ones). */
const LIST_LIMIT = 100;

/** The task fields both eras share, with each era's names for the TTL and the interval. */
function taskFields(task: TaskView, era: ProtocolEra, status: string) {
  return {
    taskId: task.id,
    status,
    ...(task.statusMessage ? { statusMessage: task.statusMessage } : {}),
    createdAt: task.createdAt.toISOString(),
    lastUpdatedAt: task.updatedAt.toISOString(),
    ...(era === "modern"
      ? { ttlMs: task.ttlMs, pollIntervalMs: TASK_POLL_INTERVAL_MS }
      : { ttl: task.ttlMs, pollInterval: TASK_POLL_INTERVAL_MS }),
  };
}

/**
 * The wire status of a task. A tool error is a result, not a protocol
 * failure: 2026-07-28 reports it `completed` with `result.isError` (SEP-2663
 * reserves `failed` for JSON-RPC errors); 2025-11-25 reports it `failed`.
 */
function wireStatus(state: TaskState, era: ProtocolEra): string {
  return state === "failed" && era === "modern" ? "completed" : state;
}

/** The answer to a `tools/call` that became a task. */
export function createTaskResult(started: StartedTask, era: ProtocolEra): Record<string, unknown> {
  const task: TaskView = {
    id: started.id,
    state: "working",
    statusMessage: "queued",
    createdAt: started.createdAt,
    updatedAt: started.createdAt,
    ttlMs: started.ttlMs,
  };
  if (era === "modern") return { resultType: "task", ...taskFields(task, era, "working") };
  return {
    task: taskFields(task, era, "working"),
    // What a host may hand the model while the task runs (2025-11-25 tasks, "Creating Tasks").
    _meta: {
      "io.modelcontextprotocol/model-immediate-response": `Generation ${started.id} started as ` +
        `a task; its images arrive when it finishes.`,
    },
  };
}

function notFound(id: string): ProtocolError {
  return new ProtocolError(
    ProtocolErrorCode.InvalidParams,
    `no task "${id}" for this caller: the id may be mistyped, it may have expired, or another ` +
      `API key (not of this key's project) made it`,
    { taskId: id },
  );
}

async function visible(
  backend: TaskBackend,
  id: string,
  scope: Scope | undefined,
): Promise<TaskView> {
  const task = await backend.get(id, scope);
  if (!task) throw notFound(id);
  return task;
}

/** Cancels for the caller, turning refusals into the JSON-RPC errors both eras use. */
async function cancelFor(
  backend: TaskBackend,
  id: string,
  scope: Scope | undefined,
  settle: boolean,
) {
  const { outcome, task } = await backend.cancel(id, scope, settle);
  if (outcome === "not_found") throw notFound(id);
  if (outcome === "not_owner") {
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `task "${id}" was made by another API key of this project; only that key can cancel it`,
      { taskId: id },
    );
  }
  return { outcome, task };
}

/**
 * 2026-07-28: the `tasks/*` methods are for clients that declared the
 * extension on the request; any other gets -32021 naming it (SEP-2663
 * "Capability Negotiation").
 */
function assertDeclared(ctx: McpHandlerContext): void {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  const capabilities = envelope?.[CLIENT_CAPABILITIES_KEY] as
    | { extensions?: Record<string, unknown> }
    | undefined;
  if (capabilities?.extensions?.[TASKS_EXTENSION_ID] !== undefined) return;
  throw new MissingRequiredClientCapabilityError({
    requiredCapabilities: { extensions: { [TASKS_EXTENSION_ID]: {} } },
  });
}

const TaskIdParams = z.looseObject({ taskId: z.string() });
// (`inputResponses` is lifted out of the params by the SDK, into `ctx.mcpReq.inputResponses`.)
const UpdateParams = z.looseObject({ taskId: z.string() });
const ListParams = z.looseObject({ cursor: z.string().optional() });

/** Registers the `tasks/*` methods of `era` on `server` for the caller `scope`. */
export function registerTaskHandlers(
  server: McpServer,
  era: ProtocolEra,
  backend: TaskBackend,
  scope: Scope | undefined,
): void {
  if (era === "modern") {
    server.setRequestHandler("tasks/get", { params: TaskIdParams }, async ({ taskId }, ctx) => {
      assertDeclared(ctx);
      const task = await visible(backend, taskId, scope);
      const status = wireStatus(task.state, era);
      return {
        ...taskFields(task, era, status),
        ...(status === "completed" && task.result ? { result: task.result } : {}),
      };
    });
    // An acknowledgement, the cancellation itself eventually consistent (SEP-2663 "Task Cancellation").
    server.setRequestHandler("tasks/cancel", { params: TaskIdParams }, async ({ taskId }, ctx) => {
      assertDeclared(ctx);
      await cancelFor(backend, taskId, scope, false);
      return {};
    });
    // This server never asks for input: every response is for no outstanding request, and ignored.
    server.setRequestHandler("tasks/update", { params: UpdateParams }, async ({ taskId }, ctx) => {
      assertDeclared(ctx);
      await visible(backend, taskId, scope);
      return {};
    });
    return;
  }
  server.setRequestHandler("tasks/get", { params: TaskIdParams }, async ({ taskId }) => {
    const task = await visible(backend, taskId, scope);
    return taskFields(task, era, wireStatus(task.state, era));
  });
  server.setRequestHandler("tasks/result", { params: TaskIdParams }, async ({ taskId }, ctx) => {
    const task = await backend.untilDone(taskId, scope, ctx.mcpReq.signal);
    if (!task) throw notFound(taskId);
    if (!task.result) {
      throw new ProtocolError(ProtocolErrorCode.InternalError, `task "${taskId}" has no result`);
    }
    const meta = { ...(task.result._meta as Record<string, unknown> | undefined) };
    return {
      ...task.result,
      _meta: { ...meta, "io.modelcontextprotocol/related-task": { taskId } },
    };
  });
  server.setRequestHandler("tasks/list", { params: ListParams }, async (params) => {
    const page = await backend.list(scope, LIST_LIMIT, params?.cursor);
    if (!page) {
      // 2025-11-25 pagination: an invalid cursor is -32602.
      throw new ProtocolError(
        ProtocolErrorCode.InvalidParams,
        `invalid cursor "${params?.cursor}": pass the nextCursor of an earlier tasks/list answer`,
      );
    }
    return {
      tasks: page.tasks.map((task) => taskFields(task, era, wireStatus(task.state, era))),
      ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}),
    };
  });
  server.setRequestHandler("tasks/cancel", { params: TaskIdParams }, async ({ taskId }) => {
    // 2025-11-25: an ended task is refused with -32602, and the answer comes once it is cancelled.
    const { outcome, task } = await cancelFor(backend, taskId, scope, true);
    if (outcome === "ended" || !task) {
      throw new ProtocolError(
        ProtocolErrorCode.InvalidParams,
        `task "${taskId}" has already ended; nothing to cancel`,
        { taskId },
      );
    }
    return taskFields(task, era, wireStatus(task.state, era));
  });
}

/**
 * The v2 SDK client (`@modelcontextprotocol/client`) against the real
 * server over real HTTP and stdio, in either era: `modern` pins 2026-07-28
 * (`server/discover`, the `_meta` envelope on every request), `legacy` is
 * its default `initialize` handshake. Every message the client receives is
 * kept in `received`, because the 2.4.0 client has no tasks API: it refuses
 * a `tools/call` answered with a task (`resultType: "task"`), so the task's
 * id is read from the raw answer, then polled with `tasks/get` as any
 * tasks-aware host does.
 *
 * @module
 */

import { z } from "zod";
import {
  ClientV2,
  StdioClientTransportV2,
  StreamableHTTPClientTransportV2,
} from "../../mod/mcp/client_sdk.ts";
import { TASKS_EXTENSION_ID } from "../../mod/mcp/mod.ts";
import { teeChildLog } from "./log_secrets.ts";
import { ROOT } from "./paths.ts";

/** Which handshake the client uses. */
export type Era = "legacy" | "modern";

/** A connected v2 client and what it received. */
export interface V2Session {
  client: ClientV2;
  /** Every JSON-RPC message the client received, in order. */
  received: Array<Record<string, unknown>>;
  /** What the server wrote to stderr (stdio only). */
  stderr: () => string;
  close(): Promise<void>;
}

/** Options of the connect functions. */
export interface V2Options {
  /** The protocol era (default `modern`). */
  era?: Era;
  /** Client capabilities (default: the tasks extension under `modern`, none under `legacy`). */
  capabilities?: Record<string, unknown>;
}

/** Capabilities of a 2026-07-28 client that runs tool calls as tasks. */
export const TASKS_CLIENT: Readonly<Record<string, unknown>> = {
  extensions: { [TASKS_EXTENSION_ID]: {} },
};

function client(options: V2Options): ClientV2 {
  const era = options.era ?? "modern";
  return new ClientV2({ name: "e2e-v2", version: "1.0.0" }, {
    capabilities: options.capabilities ?? (era === "modern" ? { ...TASKS_CLIENT } : {}),
    ...(era === "modern" ? { versionNegotiation: { mode: { pin: "2026-07-28" } } } : {}),
  });
}

/** Keeps every message `transport` delivers (set before connecting: the client chains it). */
function tap(transport: { onmessage?: unknown }): Array<Record<string, unknown>> {
  const received: Array<Record<string, unknown>> = [];
  transport.onmessage = (message: Record<string, unknown>) => received.push(message);
  return received;
}

/** A v2 client over streamable HTTP to `http://127.0.0.1:<port>/mcp`, sending `headers`. */
export async function connectHttpV2(
  port: number,
  headers: Record<string, string>,
  options: V2Options = {},
): Promise<V2Session> {
  const transport = new StreamableHTTPClientTransportV2(
    new URL(`http://127.0.0.1:${port}/mcp`),
    { requestInit: { headers } },
  );
  const received = tap(transport);
  const c = client(options);
  await c.connect(transport);
  return { client: c, received, stderr: () => "", close: () => c.close() };
}

/** Spawns the real server (`deno run -P=serve main.ts …args`) and connects a v2 client over stdio. */
export async function connectStdioV2(
  args: string[],
  options: V2Options = {},
): Promise<V2Session> {
  const transport = new StdioClientTransportV2({
    command: Deno.execPath(),
    args: ["run", "-P=serve", "--quiet", "main.ts", ...args],
    cwd: ROOT,
    env: { ...Deno.env.toObject(), NO_COLOR: "1" },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Uint8Array) => stderr += new TextDecoder().decode(chunk));
  const received = tap(transport);
  const c = client(options);
  await c.connect(transport);
  return {
    client: c,
    received,
    stderr: () => stderr,
    async close() {
      await c.close();
      teeChildLog(`stdio v2 server ${args.join(" ")}`.slice(0, 60), stderr);
    },
  };
}

/** A task as `tasks/get` (2026-07-28) reports it. */
export interface TaskAnswer {
  taskId: string;
  status: string;
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  ttlMs: number | null;
  pollIntervalMs?: number;
  resultType?: string;
  result?: { content: Array<Record<string, unknown>>; isError?: boolean };
  [key: string]: unknown;
}

const TaskSchema = z.looseObject({ taskId: z.string(), status: z.string() });
const EmptySchema = z.looseObject({});

/**
 * Calls a tool that the server answers with a task (2026-07-28, the client
 * declared the tasks extension) and returns the raw `CreateTaskResult`.
 */
export async function callAsTask(
  session: V2Session,
  params: { name: string; arguments: Record<string, unknown> },
): Promise<TaskAnswer> {
  const before = session.received.length;
  // The 2.4.0 client refuses the task handle it does not know (resultType "task").
  await session.client.callTool(params).then(
    (result) => {
      throw new Error(`the call was answered without a task: ${JSON.stringify(result)}`);
    },
    (error: Error) => {
      if (!/Unsupported result type 'task'/.test(error.message)) throw error;
    },
  );
  const answer = session.received.slice(before).find((m) =>
    (m.result as { resultType?: string } | undefined)?.resultType === "task"
  );
  if (!answer) throw new Error("no CreateTaskResult reached the client");
  return answer.result as TaskAnswer;
}

/** `tasks/get`. */
export async function getTask(session: V2Session, taskId: string): Promise<TaskAnswer> {
  return await session.client.request(
    { method: "tasks/get", params: { taskId } },
    TaskSchema,
  ) as TaskAnswer;
}

/** `tasks/cancel` (an acknowledgement). */
export async function cancelTask(session: V2Session, taskId: string): Promise<unknown> {
  return await session.client.request(
    { method: "tasks/cancel", params: { taskId } },
    EmptySchema,
  );
}

/**
 * Polls `tasks/get` at the interval the server suggests until the task
 * ended, calling `onPoll` with every answer; fails after `timeoutMs`.
 */
export async function pollTask(
  session: V2Session,
  taskId: string,
  onPoll: (task: TaskAnswer) => void = () => {},
  timeoutMs = 120_000,
): Promise<TaskAnswer> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const task = await getTask(session, taskId);
    onPoll(task);
    if (["completed", "failed", "cancelled"].includes(task.status)) return task;
    if (Date.now() > end) throw new Error(`task ${taskId} did not end: ${JSON.stringify(task)}`);
    await new Promise((r) => setTimeout(r, task.pollIntervalMs ?? 1000));
  }
}

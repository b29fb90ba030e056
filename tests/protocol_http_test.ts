/**
 * Both protocol eras over real streamable HTTP, on the app started
 * in-process with the tiny models and a real PostgreSQL: a v2 SDK client
 * pinned to 2026-07-28 (`server/discover`, per-request `_meta`, the
 * `Mcp-Method` / `Mcp-Name` headers) lists the hand-written schemas,
 * generates, runs a generation as a task (`io.modelcontextprotocol/tasks`)
 * to completion and cancels another; closing a 2026-07-28 call's stream
 * cancels its job; a v1 1.32 client runs 2025-11-25 tasks; tasks are bound
 * to the API key (and project) that made them.
 */

import assert from "node:assert/strict";
import { startApp } from "../mod/app/mod.ts";
import { loadConfig } from "../mod/config/mod.ts";
import { decodeImageInput, toRgbImage } from "../mod/image/mod.ts";
import { CallToolResultSchema } from "../mod/mcp/client_sdk.ts";
import type { Generator } from "../mod/pipeline/types.ts";
import { GENERATE_GUIDED_IMAGE_SCHEMA } from "../tools/generate_guided_image.ts";
import { generateImageSchema } from "../tools/generate_image.ts";
import { INPAINT_IMAGE_SCHEMA } from "../tools/inpaint_image.ts";
import { TRANSFORM_IMAGE_SCHEMA } from "../tools/transform_image.ts";
import { UPSCALE_IMAGE_SCHEMA } from "../tools/upscale_image.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { createTestKey } from "./helpers/log_secrets.ts";
import {
  callAsTask,
  cancelTask,
  connectHttpV2,
  getTask,
  pollTask,
  type TaskAnswer,
} from "./helpers/mcp_v2.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { contents, pngs, pngSize, texts } from "./helpers/results.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";
import { IMAGE_TOOL_NAMES } from "./helpers/tool_names.ts";

/** The app over HTTP with a write key and a read key of project 42, and a key of project 43. */
async function setup(sections = "", generator?: Generator) {
  const tdb = await openTestDatabase("protocol_http");
  const write = await createTestKey(tdb.db, { projectId: 42, userId: 7, permission: "write" });
  const read = await createTestKey(tdb.db, { projectId: 42, userId: 7, permission: "read" });
  const other = await createTestKey(tdb.db, { projectId: 43, userId: 8, permission: "write" });
  const temp = await writeTinyConfig(sections);
  const config = await loadConfig({
    path: temp.path,
    overrides: { transport: "http" },
    env: { DATABASE_URL: tdb.url },
  });
  const app = await startApp(config, { generator });
  return {
    port: app.http!.port,
    maxCount: config.generation.maxCount,
    key: (k: { key: string }) => ({ "MCP-API-Key": k.key }),
    write,
    read,
    other,
    async close() {
      await app.shutdown();
      await tdb.close();
      await temp.remove();
    },
  };
}

async function pixels(png: Uint8Array): Promise<Uint8Array> {
  const decoded = await decodeImageInput("input_image", png.toBase64());
  return (await toRgbImage(decoded, decoded.width, decoded.height)).data;
}

/**
 * An engine whose steps advance only when the test says so (`step()`), and
 * that stops at once when its job is aborted: what it reports shows exactly
 * at which step a cancellation landed.
 */
function gatedGenerator() {
  const state = { steps: 0, aborted: false, abortedAtStep: -1 };
  const gates: Array<() => void> = [];
  let stepped: () => void = () => {};
  const generator: Generator = {
    generate(_request, options) {
      return new Promise((_resolve, reject) => {
        const next = () => {
          gates.push(() => {
            options?.onProgress?.(++state.steps, 1000);
            stepped();
            next();
          });
        };
        next();
        options?.signal?.addEventListener("abort", () => {
          state.aborted = true;
          state.abortedAtStep = state.steps;
          reject(options.signal!.reason);
        }, { once: true });
      });
    },
    close: () => Promise.resolve(),
  };
  return {
    generator,
    state,
    /** Lets the engine run one step and resolves once it reported it. */
    step: () =>
      new Promise<void>((resolve) => {
        stepped = resolve;
        const wait = () => gates.length ? gates.shift()!() : setTimeout(wait, 5);
        wait();
      }),
  };
}

/** One raw 2026-07-28 request over HTTP (envelope and standard headers written out); its JSON answer. */
async function postModern(
  port: number,
  key: string,
  method: string,
  params: Record<string, unknown>,
): Promise<{ result?: Record<string, unknown>; error?: { code: number; message: string } }> {
  const response = await fetch(`http://127.0.0.1:${port}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-api-key": key,
      "mcp-protocol-version": "2026-07-28",
      "mcp-method": method,
      ...(typeof params.taskId === "string" ? { "mcp-name": params.taskId } : {}),
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method,
      params: {
        ...params,
        _meta: {
          "io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {},
        },
      },
    }),
  });
  const text = await response.text();
  const data = text.split("\n").find((l) => l.startsWith("data: "));
  return JSON.parse(data ? data.slice(6) : text);
}

async function until(condition: () => boolean | Promise<boolean>, label: string) {
  for (let i = 0; i < 800; i++) {
    if (await condition()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${label}`);
}

const HAND_WRITTEN: Record<string, unknown> = {
  generate_guided_image: GENERATE_GUIDED_IMAGE_SCHEMA,
  inpaint_image: INPAINT_IMAGE_SCHEMA,
  transform_image: TRANSFORM_IMAGE_SCHEMA,
  upscale_image: UPSCALE_IMAGE_SCHEMA,
};

Deno.test("http 2026-07-28: a v2 client discovers, lists the hand-written schemas and generates", async () => {
  const s = await setup(`[generation]\nseed = 4321\nsteps = 4\n`);
  try {
    const session = await connectHttpV2(s.port, s.key(s.write), { capabilities: {} });
    const legacy = await connectHttp(s.port, s.key(s.write));
    try {
      const client = session.client;
      assert.equal(client.getProtocolEra(), "modern");
      assert.equal(client.getServerVersion()?.name, "generate-image-sd15-mcp");
      // server/discover advertises the tasks extension and MCP Apps; no 2025 `tasks` capability.
      const caps = client.getServerCapabilities();
      assert.deepEqual(Object.keys(caps?.extensions ?? {}).sort(), [
        "io.modelcontextprotocol/tasks",
        "io.modelcontextprotocol/ui",
      ]);
      assert.equal((caps as Record<string, unknown>).tasks, undefined);
      assert.match(client.getInstructions() ?? "", /Stable Diffusion 1\.5/);

      const listed = await client.listTools();
      assert.deepEqual(listed.tools.map((t) => t.name), IMAGE_TOOL_NAMES);
      const byName = Object.fromEntries(listed.tools.map((t) => [t.name, t]));
      assert.deepEqual(
        byName.generate_image.inputSchema,
        JSON.parse(JSON.stringify(generateImageSchema(s.maxCount))),
      );
      for (const [name, schema] of Object.entries(HAND_WRITTEN)) {
        assert.deepEqual(byName[name].inputSchema, JSON.parse(JSON.stringify(schema)), name);
      }
      // The same server in the 2025 era lists the same tools, schemas and all, plus their
      // 2025-11-25 `execution`, which 2026-07-28 no longer has (the server decides there).
      const old = await legacy.listTools();
      for (const tool of old.tools) {
        const { execution, ...rest } = tool as typeof tool & { execution?: unknown };
        assert.deepEqual(
          { ...byName[tool.name], _meta: undefined },
          { ...rest, _meta: undefined },
        );
        assert.equal((byName[tool.name] as Record<string, unknown>).execution, undefined);
        if (IMAGE_TOOL_NAMES.indexOf(tool.name) < 5) {
          assert.deepEqual(execution, { taskSupport: "optional" });
        } else {
          assert.equal(execution, undefined);
        }
      }
      // The MCP Apps view is named to this client only if it says it renders it: it did not.
      assert.equal(byName.generate_image._meta?.ui, undefined);

      const progress: number[] = [];
      const result = await client.callTool(
        {
          name: "generate_image",
          arguments: { positive_prompt: "a red cube", size: "landscape_512" },
        },
        { onprogress: (p) => progress.push(p.progress) },
      );
      assert.equal(result.isError, undefined, texts(result));
      const [png] = pngs(result);
      assert.deepEqual(pngSize(png), [512, 384]);
      assert.ok(progress.length >= 4, `progress: ${progress}`);
      // Field-level tool errors, as in the 2025 era.
      const bad = await client.callTool({
        name: "generate_image",
        arguments: { positive_prompt: "a cat", size: "huge" },
      });
      assert.equal(bad.isError, true);
      assert.match(texts(bad), /size: must be one of .* got "huge"/);
    } finally {
      await session.close();
      await legacy.close();
    }
  } finally {
    await s.close();
  }
});

Deno.test("http 2026-07-28: a generation runs as a task: progress in tasks/get, then exactly the call's result", async () => {
  const s = await setup(`[generation]\nseed = 4321\nsteps = 6\n`);
  try {
    const session = await connectHttpV2(s.port, s.key(s.write));
    const plain = await connectHttpV2(s.port, s.key(s.write), { capabilities: {} });
    try {
      const args = { positive_prompt: "a green pear", size: "square_512" };
      const created = await callAsTask(session, { name: "generate_image", arguments: args });
      assert.equal(created.resultType, "task");
      assert.equal(created.status, "working");
      assert.match(created.taskId, /^gen_[A-Za-z0-9_-]{22}$/);
      // No TTL asked for: the longest, [jobs] result_ttl_seconds (default an hour), said at creation.
      assert.equal(created.ttlMs, 3_600_000);
      assert.ok(created.pollIntervalMs! > 0);
      assert.ok(!Number.isNaN(Date.parse(created.createdAt)));

      const seen: TaskAnswer[] = [];
      const done = await pollTask(session, created.taskId, (task) => seen.push(task));
      assert.equal(done.status, "completed", JSON.stringify(done));
      // tasks/get is a plain result on the wire (the client strips the discriminator).
      const raw = session.received.findLast((m) =>
        (m.result as { taskId?: string } | undefined)?.taskId === created.taskId
      );
      assert.equal((raw?.result as { resultType?: string }).resultType, "complete");
      // The progress of the working polls is in statusMessage.
      for (const task of seen.filter((t) => t.status === "working")) {
        assert.match(task.statusMessage ?? "", /^(queued|starting|running: step \d+ of \d+)/);
      }
      assert.ok(done.ttlMs! > 0, "a finished task says how long it is kept");
      // Exactly what tools/call gives: one PNG, the same pixels as a plain call with the same seed.
      const direct = await plain.client.callTool({ name: "generate_image", arguments: args });
      assert.deepEqual(
        contents(done.result).map((c) => c.type),
        contents(direct).map((c) => c.type),
      );
      assert.deepEqual(
        await pixels(pngs(done.result)[0]),
        await pixels(pngs(direct)[0]),
      );
      // A task IS a job: get_generation with its id returns the same image.
      const fetched = await plain.client.callTool({
        name: "get_generation",
        arguments: { job_id: created.taskId },
      });
      assert.deepEqual(pngs(fetched)[0], pngs(done.result)[0]);
      // 2025-11-25's tasks/result and tasks/list do not exist in 2026-07-28 (the v2 client will
      // not even send them, so they go out as raw requests).
      for (const method of ["tasks/result", "tasks/list"]) {
        const answer = await postModern(s.port, s.write.key, method, { taskId: created.taskId });
        assert.equal(answer.error?.code, -32601, `${method}: ${JSON.stringify(answer)}`);
      }
      // A client that does not declare the extension gets the result itself, never a task.
      const noTask = await plain.client.callTool({ name: "generate_image", arguments: args });
      assert.equal(pngs(noTask).length, 1);
    } finally {
      await session.close();
      await plain.close();
    }
  } finally {
    await s.close();
  }
});

Deno.test("http 2026-07-28: tasks/cancel stops the engine within the step it is in", async () => {
  const gated = gatedGenerator();
  const s = await setup("", gated.generator);
  try {
    const session = await connectHttpV2(s.port, s.key(s.write));
    try {
      const created = await callAsTask(session, {
        name: "generate_image",
        arguments: { positive_prompt: "a long one" },
      });
      await gated.step();
      await gated.step();
      await until(
        async () =>
          /step 2 of 1000/.test((await getTask(session, created.taskId)).statusMessage ?? ""),
        "the task's progress",
      );
      // An acknowledgement: nothing but the server's name in `_meta`.
      const ack = await cancelTask(session, created.taskId) as Record<string, unknown>;
      assert.deepEqual(Object.keys(ack), ["_meta"]);
      // The engine is stopped at the step it is in: it never ran a third.
      await until(() => gated.state.aborted, "the engine to stop");
      assert.equal(gated.state.abortedAtStep, 2);
      const ended = await pollTask(session, created.taskId);
      assert.equal(ended.status, "cancelled");
      assert.equal(ended.result, undefined);
      assert.equal(ended.statusMessage, "cancelled at step 2 of 1000");
      // Cancelling again is an acknowledgement too; an unknown id is -32602.
      await cancelTask(session, created.taskId);
      await assert.rejects(
        getTask(session, "gen_AAAAAAAAAAAAAAAAAAAAAA"),
        (e: Error & { code?: number }) => e.code === -32602,
      );
    } finally {
      await session.close();
    }
  } finally {
    await s.close();
  }
});

Deno.test("http 2026-07-28: closing a call's response stream cancels its job", async () => {
  const gated = gatedGenerator();
  const s = await setup("", gated.generator);
  try {
    const session = await connectHttpV2(s.port, s.key(s.write), { capabilities: {} });
    const watcher = await connectHttp(s.port, s.key(s.write));
    try {
      const controller = new AbortController();
      const call = session.client.callTool(
        { name: "generate_image", arguments: { positive_prompt: "a long one" } },
        { signal: controller.signal, onprogress: () => {} },
      );
      await gated.step();
      // The v2 client cancels a 2026-07-28 request by closing its stream (no notification).
      controller.abort("changed my mind");
      await assert.rejects(call);
      await until(() => gated.state.aborted, "the engine to stop");
      assert.equal(gated.state.abortedAtStep, 1);
      const state = async () => {
        const listed = await watcher.callTool({ name: "list_generations", arguments: {} });
        return (listed.structuredContent as { generations: Array<{ state: string }> })
          .generations[0].state;
      };
      await until(async () => await state() !== "running", "the job to end");
      assert.equal(await state(), "cancelled");
    } finally {
      await session.close();
      await watcher.close();
    }
  } finally {
    await s.close();
  }
});

Deno.test("http 2025-11-25: a v1 client runs a generation as a task (tasks/get, tasks/result, tasks/list, tasks/cancel)", async () => {
  const s = await setup(`[generation]\nsteps = 4\n`);
  try {
    const client = await connectHttp(s.port, s.key(s.write));
    try {
      assert.deepEqual(client.getServerCapabilities()?.tasks, {
        list: {},
        cancel: {},
        requests: { tools: { call: {} } },
      });
      const tasks = client.experimental.tasks;
      const stream = tasks.callToolStream(
        { name: "generate_image", arguments: { positive_prompt: "a blue vase" } },
        CallToolResultSchema,
        { task: { ttl: 60_000 } },
      );
      let taskId = "";
      let createdTtl: number | null | undefined;
      let result: Record<string, unknown> | undefined;
      for await (const message of stream) {
        if (message.type === "taskCreated") {
          taskId = message.task.taskId;
          createdTtl = message.task.ttl;
        }
        if (message.type === "result") result = message.result;
        if (message.type === "error") throw message.error;
      }
      assert.match(taskId, /^gen_/);
      assert.equal(pngs(result).length, 1, JSON.stringify(result).slice(0, 300));
      // The TTL asked for (a minute, the shortest allowed) is the one given, said at creation.
      assert.equal(createdTtl, 60_000);
      const task = await tasks.getTask(taskId);
      assert.equal(task.status, "completed");
      assert.ok(task.ttl! >= 60_000, `kept ${task.ttl} ms`);
      const again = await tasks.getTaskResult(taskId, CallToolResultSchema);
      assert.deepEqual(pngs(again), pngs(result));
      const listed = await tasks.listTasks();
      assert.deepEqual(listed.tasks.map((t) => [t.taskId, t.status]), [[taskId, "completed"]]);
      // An ended task cannot be cancelled (2025-11-25: -32602).
      await assert.rejects(tasks.cancelTask(taskId), /already ended/);
      // A tool that runs no tasks refuses params.task with -32601.
      await assert.rejects(
        client.request(
          { method: "tools/call", params: { name: "list_generations", arguments: {}, task: {} } },
          CallToolResultSchema,
        ),
        /does not run as a task/,
      );
    } finally {
      await client.close();
    }
  } finally {
    await s.close();
  }
});

Deno.test("http: a task is bound to the key that made it (and its project)", async () => {
  const gated = gatedGenerator();
  const s = await setup("", gated.generator);
  try {
    const owner = await connectHttpV2(s.port, s.key(s.write));
    const sameProject = await connectHttpV2(s.port, s.key(s.read));
    const stranger = await connectHttpV2(s.port, s.key(s.other));
    try {
      const created = await callAsTask(owner, {
        name: "generate_image",
        arguments: { positive_prompt: "mine" },
      });
      // Another project's key: the task does not exist for it, to read or to cancel.
      for (const attempt of [getTask, cancelTask]) {
        await assert.rejects(
          attempt(stranger, created.taskId),
          (e: Error & { code?: number }) => e.code === -32602 && /no task/.test(e.message),
        );
      }
      // A key of the same project sees it (as list_generations does) but may not stop it.
      assert.equal((await getTask(sameProject, created.taskId)).taskId, created.taskId);
      await assert.rejects(
        cancelTask(sameProject, created.taskId),
        /made by another API key of this project/,
      );
      assert.equal(gated.state.aborted, false);
      await cancelTask(owner, created.taskId);
      await until(() => gated.state.aborted, "the owner's cancellation");
    } finally {
      await owner.close();
      await sameProject.close();
      await stranger.close();
    }
  } finally {
    await s.close();
  }
});

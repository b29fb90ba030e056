/**
 * End to end over real streamable HTTP: the app started in-process on port
 * 0 with the tiny models, a real (embedded or `DATABASE_URL`) PostgreSQL
 * holding the API keys, and the SDK client.
 */

import assert from "node:assert/strict";
import { createTestKey as createKey } from "./helpers/log_secrets.ts";
import { startApp } from "../mod/app/mod.ts";
import { loadConfig } from "../mod/config/mod.ts";
import { readPngText } from "../mod/image/mod.ts";
import { MAX_REQUEST_BYTES } from "../mod/mcp/mod.ts";
import { processUsableCores } from "../mod/onnx/mod.ts";
import type { Generator } from "../mod/pipeline/types.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { pngs, pngSize, texts } from "./helpers/results.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";
import { DESIGN_CODE_TOOL_NAMES, IMAGE_TOOL_NAMES } from "./helpers/tool_names.ts";
import { initializeRequest } from "./helpers/json_rpc.ts";

async function setup(
  sections = "",
  env: Record<string, string> = {},
  generator?: Generator,
  server: Record<string, string | number> = {},
) {
  const tdb = await openTestDatabase("http_e2e");
  const write = await createKey(tdb.db, { projectId: 42, userId: 7, permission: "write" });
  const read = await createKey(tdb.db, { projectId: 42, userId: 7, permission: "read" });
  const temp = await writeTinyConfig(sections, server);
  const config = await loadConfig({
    path: temp.path,
    overrides: { transport: "http" },
    env: { DATABASE_URL: tdb.url, ...env },
  });
  const app = await startApp(config, { generator });
  const port = app.http!.port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    writeKey: write.key,
    readKey: read.key,
    async close() {
      await app.shutdown();
      await tdb.close();
      await temp.remove();
    },
  };
}

Deno.test("http: initialize, list, bad call as isError, keep serving; plain HTTP rules", async (t) => {
  const s = await setup();
  try {
    const client = await connectHttp(s.port, { "MCP-API-Key": s.writeKey });
    try {
      await t.step("tools/list shows the image and job tools", async () => {
        const listed = await client.listTools();
        assert.deepEqual(listed.tools.map((tool) => tool.name), IMAGE_TOOL_NAMES);
      });
      await t.step("a bad call is a tool error and the server keeps serving", async () => {
        const bad = await client.callTool({
          name: "generate_image",
          arguments: { positive_prompt: "", size: "square_512" },
        });
        assert.equal(bad.isError, true);
        assert.match(texts(bad), /positive_prompt: must not be empty/);
        const again = await client.listTools();
        assert.equal(again.tools.length, IMAGE_TOOL_NAMES.length);
      });
    } finally {
      await client.close();
    }

    // Credentials are checked first (this step once sent no key and read 405): a
    // client that opens the GET stream with a refused key reads the 401's reason.
    await t.step("GET and DELETE /mcp answer 401 without a key, 405 with one", async () => {
      for (const method of ["GET", "DELETE"]) {
        const refused = await fetch(`${s.url}/mcp`, { method });
        assert.equal(refused.status, 401, method);
        assert.equal((await refused.json()).error.code, -32001);
        const response = await fetch(`${s.url}/mcp`, {
          method,
          headers: { "mcp-api-key": s.writeKey },
        });
        assert.equal(response.status, 405, method);
        assert.equal(response.headers.get("allow"), "POST");
        await response.body?.cancel();
      }
    });

    await t.step(
      "/healthz answers 200 with the queue, the preset images are made with and the threads",
      async () => {
        const response = await fetch(`${s.url}/healthz`);
        assert.equal(response.status, 200);
        const body = await response.json();
        assert.equal(body.status, "ok");
        assert.deepEqual(body.queue, { running: false, waiting: 0, limit: 8 });
        assert.deepEqual(body.generation, {
          preset: "quality",
          chosenBy: "config",
          steps: 25,
          scheduler: "pndm",
          guidanceScale: 7.5,
          vaeDecoder: "full",
        });
        // The test config writes intra_op_threads = 1; inter-op threads exist only in parallel mode.
        assert.deepEqual(body.runtime, {
          executionProvider: "cpu",
          intraOpThreads: 1,
          interOpThreads: 0,
          usableCores: processUsableCores().count,
        });
      },
    );

    await t.step("a browser Origin that is not allowed gets 403", async () => {
      const response = await fetch(`${s.url}/mcp`, {
        method: "POST",
        headers: {
          origin: "http://evil.example",
          "content-type": "application/json",
          "mcp-api-key": s.writeKey,
        },
        body: "{}",
      });
      assert.equal(response.status, 403);
      assert.match((await response.json()).error.message, /origin http:\/\/evil\.example/);
    });

    await t.step("no API key gets 401 before any MCP work", async () => {
      const response = await fetch(`${s.url}/mcp`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      });
      assert.equal(response.status, 401);
      // An API-key challenge: a Bearer one sent OAuth clients into discovery.
      assert.match(response.headers.get("www-authenticate") ?? "", /^ApiKey realm="mcp"/);
      await response.body?.cancel();
    });

    await t.step("a body over the cap gets 413, declared or streamed", async () => {
      // Raw TCP: fetch would replace a Content-Length that does not match its body.
      const conn = await Deno.connect({ hostname: "127.0.0.1", port: s.port });
      await conn.write(new TextEncoder().encode(
        `POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n` +
          `mcp-api-key: ${s.writeKey}\r\ncontent-length: ${MAX_REQUEST_BYTES + 1}\r\n\r\n{`,
      ));
      const buffer = new Uint8Array(4096);
      const n = await conn.read(buffer);
      conn.close();
      assert.match(new TextDecoder().decode(buffer.subarray(0, n ?? 0)), /^HTTP\/1\.1 413/);
      const chunk = new Uint8Array(4 * 1024 * 1024).fill(0x20);
      let sent = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent > MAX_REQUEST_BYTES + chunk.length) return controller.close();
          sent += chunk.length;
          controller.enqueue(chunk);
        },
      });
      const streamed = await fetch(`${s.url}/mcp`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-api-key": s.writeKey,
        },
        body,
      });
      assert.equal(streamed.status, 413);
      await streamed.body?.cancel();
    });

    await t.step("a read key may not call the image tools", async () => {
      const reader = await connectHttp(s.port, { authorization: `Bearer ${s.readKey}` });
      try {
        const result = await reader.callTool({
          name: "generate_image",
          arguments: { positive_prompt: "a cat" },
        });
        assert.equal(result.isError, true);
        assert.match(texts(result), /has read permission; this tool is not read-only/);
      } finally {
        await reader.close();
      }
    });
  } finally {
    await s.close();
  }
});

Deno.test("http: generate_image streams progress and returns a PNG; tools/list answers meanwhile", async () => {
  const s = await setup(`[generation]\nsteps = 12\n`);
  try {
    const client = await connectHttp(s.port, { "MCP-API-Key": s.writeKey });
    const lister = await connectHttp(s.port, { "MCP-API-Key": s.writeKey });
    try {
      const progress: number[] = [];
      let firstProgress!: () => void;
      const started = new Promise<void>((r) => firstProgress = r);
      let generationDone = false;
      const call = client.callTool(
        {
          name: "generate_image",
          arguments: { positive_prompt: "a lighthouse", size: "portrait_512" },
        },
        undefined,
        {
          timeout: 120_000,
          onprogress: (p) => {
            progress.push(p.progress);
            if (progress.length === 1) firstProgress();
          },
        },
      ).finally(() => generationDone = true);
      await started;
      // Ordering, not timing: the list must come back while the generation is still running.
      const listed = await lister.listTools();
      const listedDuringGeneration = !generationDone;
      const result = await call;
      assert.equal(listed.tools.length, IMAGE_TOOL_NAMES.length);
      assert.ok(listedDuringGeneration, "tools/list waited for the generation");
      assert.equal(result.isError, undefined, texts(result));
      const [png] = pngs(result);
      assert.deepEqual(pngSize(png), [384, 512]);
      assert.equal(readPngText(png).mode, "text_to_image");
      assert.ok(progress.length >= 12, `progress: ${progress}`);
    } finally {
      await client.close();
      await lister.close();
    }
  } finally {
    await s.close();
  }
});

/**
 * An engine that reports steps until it is aborted: cancellation is then the
 * only way a call can end (the real engine's step-boundary check is tested in
 * mod/pipeline and over stdio).
 */
function endlessGenerator() {
  const state = { aborted: false, steps: 0 };
  const generator: Generator = {
    generate(_request, options) {
      return new Promise((_resolve, reject) => {
        const timer = setInterval(() => options?.onProgress?.(++state.steps, 1_000_000), 10);
        options?.signal?.addEventListener("abort", () => {
          clearInterval(timer);
          state.aborted = true;
          reject(options.signal!.reason);
        }, { once: true });
      });
    },
    close: () => Promise.resolve(),
  };
  return { generator, state };
}

async function until(condition: () => boolean) {
  for (let i = 0; i < 400 && !condition(); i++) await new Promise((r) => setTimeout(r, 25));
}

Deno.test("http: notifications/cancelled from the SDK client stops the generation", async () => {
  const { generator, state } = endlessGenerator();
  const s = await setup("", {}, generator);
  try {
    const client = await connectHttp(s.port, { "MCP-API-Key": s.writeKey });
    try {
      const controller = new AbortController();
      let seen = 0;
      const call = client.callTool(
        { name: "generate_image", arguments: { positive_prompt: "a slow one" } },
        undefined,
        {
          signal: controller.signal,
          onprogress: () => {
            if (++seen === 2) controller.abort(new Error("user cancelled"));
          },
        },
      );
      await assert.rejects(call);
      await until(() => state.aborted);
      assert.ok(state.aborted, "the cancellation never reached the engine");
      const health = await (await fetch(`${s.url}/healthz`)).json();
      assert.equal(health.queue.running, false);
    } finally {
      await client.close();
    }
  } finally {
    await s.close();
  }
});

Deno.test("http: a client that disconnects mid-stream does not cancel: the job goes on, listed and cancellable", async () => {
  const { generator, state } = endlessGenerator();
  const s = await setup("", {}, generator);
  try {
    const controller = new AbortController();
    const response = await fetch(`${s.url}/mcp`, {
      method: "POST",
      signal: controller.signal,
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-api-key": s.writeKey,
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: {
          name: "generate_image",
          arguments: { positive_prompt: "x" },
          _meta: { progressToken: "p" },
        },
      }),
    });
    assert.equal(response.status, 200);
    const reader = response.body!.getReader();
    await reader.read(); // the first progress event
    controller.abort();
    await reader.cancel().catch(() => {});
    // MCP 2025-11-25: a disconnection is not a cancellation. The engine keeps going.
    const steps = state.steps;
    await until(() => state.steps > steps + 20);
    assert.equal(state.aborted, false, "the disconnect cancelled the generation");
    const client = await connectHttp(s.port, { "MCP-API-Key": s.writeKey });
    try {
      const listed = await client.callTool({ name: "list_generations", arguments: {} });
      const [job] =
        (listed.structuredContent as { generations: Array<{ job_id: string; state: string }> })
          .generations;
      assert.equal(job.state, "running");
      // Stopping it takes an explicit cancellation.
      await client.callTool({ name: "cancel_generation", arguments: { job_id: job.job_id } });
      await until(() => state.aborted);
      assert.ok(state.aborted, "cancel_generation never reached the engine");
    } finally {
      await client.close();
    }
  } finally {
    await s.close();
  }
});

Deno.test("http: the design-code tools are listed only with BACKEND_INTERNAL_URL", async () => {
  const s = await setup("", { BACKEND_INTERNAL_URL: "http://127.0.0.1:9/" });
  try {
    const client = await connectHttp(s.port, { "MCP-API-Key": s.writeKey });
    try {
      const names = (await client.listTools()).tools.map((t) => t.name);
      assert.deepEqual(names, [...IMAGE_TOOL_NAMES, ...DESIGN_CODE_TOOL_NAMES]);
    } finally {
      await client.close();
    }
  } finally {
    await s.close();
  }
});

Deno.test("http: batches, JSON floods and big non-image bodies are refused; bad arguments are isError", async (t) => {
  const s = await setup("", {}, undefined, { header_timeout_seconds: 0.5 });
  const post = (body: string) =>
    fetch(`${s.url}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-api-key": s.writeKey,
      },
      body,
    });
  try {
    await t.step("a JSON-RPC batch gets -32600", async () => {
      const response = await post(JSON.stringify([
        { jsonrpc: "2.0", id: 1, method: "ping" },
        { jsonrpc: "2.0", id: 2, method: "ping" },
      ]));
      assert.equal(response.status, 400);
      const body = await response.json();
      assert.equal(body.error.code, -32600);
      assert.match(body.error.message, /batches are not supported/);
    });
    await t.step("a body of 300,000 empty objects is refused before JSON.parse", async () => {
      const response = await post(
        `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":[` +
          "{},".repeat(300_000) + "{}]}}}",
      );
      assert.equal(response.status, 400);
      assert.match((await response.json()).error.message, /more than 100,000 values/);
    });
    await t.step("a 2 MiB ping gets 413; only image tool calls may be that big", async () => {
      const response = await post(JSON.stringify({
        jsonrpc: "2.0",
        id: 3,
        method: "ping",
        params: { _meta: { pad: "A".repeat(2 * 1024 * 1024) } },
      }));
      assert.equal(response.status, 413);
      const body = await response.json();
      assert.equal(body.id, 3);
      assert.match(
        body.error.message,
        /only tools\/call of generate_guided_image and inpaint_image/,
      );
    });
    await t.step(
      "a request head dribbled past server.header_timeout_seconds gets 408",
      async () => {
        const conn = await Deno.connect({ hostname: "127.0.0.1", port: s.port });
        await conn.write(new TextEncoder().encode(`POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n`));
        const buffer = new Uint8Array(4096);
        const n = await conn.read(buffer);
        conn.close();
        assert.match(new TextDecoder().decode(buffer.subarray(0, n ?? 0)), /^HTTP\/1\.1 408 /);
      },
    );
    await t.step("non-object arguments are a tool error, not -32603", async () => {
      const response = await post(JSON.stringify({
        jsonrpc: "2.0",
        id: 4,
        method: "tools/call",
        params: { name: "generate_image", arguments: "a cat" },
      }));
      assert.equal(response.status, 200);
      const text = await response.text();
      const data = JSON.parse(text.split("\n").find((l) => l.startsWith("data: "))!.slice(6));
      assert.equal(data.id, 4);
      assert.equal(data.result.isError, true);
      assert.match(data.result.content[0].text, /arguments: must be an object .*got a string/);
    });
  } finally {
    await s.close();
  }
});

Deno.test("http: only the client that sent a request can cancel it; requests in flight per key are capped", async (t) => {
  const { generator, state } = endlessGenerator();
  const s = await setup("", {}, generator, { max_requests_per_key: 2 });
  const post = (body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) =>
    fetch(`${s.url}/mcp`, {
      method: "POST",
      signal,
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-api-key": s.writeKey,
        ...headers,
      },
      body: JSON.stringify(body),
    });
  const cancel = (requestId: number) => ({
    jsonrpc: "2.0",
    method: "notifications/cancelled",
    params: { requestId, reason: "not yours" },
  });
  const stepsAfter = async (n: number) => {
    const target = state.steps + n;
    await until(() => state.steps >= target || state.aborted);
  };
  try {
    const a = await connectHttp(s.port, { "MCP-API-Key": s.writeKey });
    const aSession = (a.transport as unknown as { sessionId?: string }).sessionId;
    assert.match(aSession ?? "", /^[0-9a-f]{32}$/, "initialize issued no client id");
    let started!: () => void;
    const running = new Promise<void>((r) => started = r);
    // The SDK numbers requests from 0: initialize was 0, this call is 1.
    const call = a.callTool(
      { name: "generate_image", arguments: { positive_prompt: "a long one" } },
      undefined,
      { onprogress: () => started(), timeout: 120_000 },
    ).catch((error) => error);
    await running;

    await t.step("another client of the same key cannot cancel request 1", async () => {
      const init = await post(initializeRequest(0, "b"));
      const bSession = init.headers.get("mcp-session-id")!;
      await init.body?.cancel();
      assert.match(bSession, /^[0-9a-f]{32}$/);
      assert.notEqual(bSession, aSession);
      const other = await post(cancel(1), { "mcp-session-id": bSession });
      assert.equal(other.status, 202);
      const anonymous = await post(cancel(1));
      assert.equal(anonymous.status, 202);
      await stepsAfter(5);
      assert.equal(state.aborted, false, "a foreign cancellation stopped the generation");
    });

    await t.step("a third request of the key in flight gets 429 with retry-after", async () => {
      const streaming = new AbortController();
      const second = await post(
        {
          jsonrpc: "2.0",
          id: 9,
          method: "tools/call",
          params: { name: "generate_image", arguments: { positive_prompt: "queued" } },
        },
        {},
        streaming.signal,
      );
      assert.equal(second.status, 200);
      const third = await post({ jsonrpc: "2.0", id: 10, method: "tools/list" });
      assert.equal(third.status, 429);
      assert.equal(third.headers.get("retry-after"), "1");
      const refusal = (await third.json()).error;
      assert.match(
        refusal.message,
        /server\.max_requests_per_key = 2\); retry when one has finished/,
      );
      assert.deepEqual(refusal.data, {
        limit: "server.max_requests_per_key",
        value: 2,
        retry_after_seconds: 1,
      });
      streaming.abort();
      await second.body?.cancel().catch(() => {});
      let again: Response | undefined;
      for (let i = 0; i < 100; i++) {
        again = await post({ jsonrpc: "2.0", id: 11, method: "tools/list" });
        if (again.status !== 429) break;
        await again.body?.cancel();
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(again!.status, 200);
      await again!.body?.cancel();
    });

    await t.step("the same cancellation with the requesting client's id stops it", async () => {
      const own = await post(cancel(1), { "mcp-session-id": aSession! });
      assert.equal(own.status, 202);
      await until(() => state.aborted);
      assert.ok(state.aborted, "the owner's cancellation did not reach the engine");
    });
    // A cancelled request gets no reply; closing the client settles the call.
    await a.close();
    await call;
  } finally {
    await s.close();
  }
});

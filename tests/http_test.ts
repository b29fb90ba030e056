/**
 * End to end over real streamable HTTP: the app started in-process on port
 * 0 with the tiny models, a real (embedded or `DATABASE_URL`) PostgreSQL
 * holding the API keys, and the SDK client.
 */

import assert from "node:assert/strict";
import { createKey } from "../mod/auth/create_key.ts";
import { startApp } from "../mod/app/mod.ts";
import { loadConfig } from "../mod/config/mod.ts";
import { readPngText } from "../mod/image/mod.ts";
import { MAX_REQUEST_BYTES } from "../mod/mcp/mod.ts";
import type { Generator } from "../mod/pipeline/types.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { pngs, pngSize, texts } from "./helpers/results.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";

async function setup(sections = "", env: Record<string, string> = {}, generator?: Generator) {
  const tdb = await openTestDatabase("http_e2e");
  const write = await createKey(tdb.db, { projectId: 42, userId: 7, permission: "write" });
  const read = await createKey(tdb.db, { projectId: 42, userId: 7, permission: "read" });
  const temp = await writeTinyConfig(sections);
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
        assert.deepEqual(listed.tools.map((tool) => tool.name), [
          "generate_image",
          "generate_guided_image",
          "inpaint_image",
          "get_generation",
          "cancel_generation",
          "list_generations",
        ]);
      });
      await t.step("a bad call is a tool error and the server keeps serving", async () => {
        const bad = await client.callTool({
          name: "generate_image",
          arguments: { positive_prompt: "", size: "square_512" },
        });
        assert.equal(bad.isError, true);
        assert.match(texts(bad), /positive_prompt: must not be empty/);
        const again = await client.listTools();
        assert.equal(again.tools.length, 6);
      });
    } finally {
      await client.close();
    }

    await t.step("GET and DELETE /mcp answer 405", async () => {
      for (const method of ["GET", "DELETE"]) {
        const response = await fetch(`${s.url}/mcp`, { method });
        assert.equal(response.status, 405);
        assert.equal(response.headers.get("allow"), "POST");
        await response.body?.cancel();
      }
    });

    await t.step("/healthz answers 200 with the queue", async () => {
      const response = await fetch(`${s.url}/healthz`);
      assert.equal(response.status, 200);
      const body = await response.json();
      assert.equal(body.status, "ok");
      assert.deepEqual(body.queue, { running: false, waiting: 0, limit: 8 });
    });

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
      assert.match(response.headers.get("www-authenticate") ?? "", /^Bearer/);
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
      assert.equal(listed.tools.length, 6);
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

Deno.test("http: a client that disconnects mid-stream cancels its generation", async () => {
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
    await until(() => state.aborted);
    assert.ok(state.aborted, "the disconnect never reached the engine");
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
      assert.deepEqual(names, [
        "generate_image",
        "generate_guided_image",
        "inpaint_image",
        "get_generation",
        "cancel_generation",
        "list_generations",
        "trigger-des2code",
        "get-des2code",
        "list-designs",
        "list-code",
        "get-design-detail",
        "get-code-detail",
      ]);
    } finally {
      await client.close();
    }
  } finally {
    await s.close();
  }
});

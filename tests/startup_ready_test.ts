/**
 * Start-up without waiting for the models: `initialize` is
 * answered while the engine is still starting, `tools/list` waits for it,
 * and a failed start lists no tool and ends the process with its message.
 * Real SDK clients over real HTTP (in-process app, engine held back by a
 * promise) and real stdio (the real program with a failing model check).
 */

import assert from "node:assert/strict";
import { createKey } from "../mod/auth/create_key.ts";
import { startApp } from "../mod/app/mod.ts";
import { loadConfig } from "../mod/config/mod.ts";
import { Client, StdioClientTransport } from "../mod/mcp/client_sdk.ts";
import type { GenerationRequest, Generator } from "../mod/pipeline/types.ts";
import { connectHttp } from "./helpers/http_client.ts";
import { ROOT } from "./helpers/paths.ts";
import { openTestDatabase } from "./helpers/postgres.ts";
import { pngs } from "./helpers/results.ts";
import { emptyModelsRoot, writeTinyConfig } from "./helpers/tiny_config.ts";
import { IMAGE_TOOL_NAMES } from "./helpers/tool_names.ts";

/** A generator that paints a grey image. */
const grey: Generator = {
  generate: (request: GenerationRequest) =>
    Promise.resolve({
      image: {
        width: request.width,
        height: request.height,
        data: new Uint8Array(request.width * request.height * 3).fill(128),
      },
      notes: [],
    }),
  close: () => Promise.resolve(),
};

/** Whether `promise` is still pending after the event loop had a few turns. */
async function pending(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  promise.then(() => settled = true, () => settled = true);
  for (let i = 0; i < 20; i++) await new Promise((r) => setTimeout(r, 5));
  return !settled;
}

async function httpApp(generator: Promise<Generator>) {
  const tdb = await openTestDatabase("startup_ready");
  const write = await createKey(tdb.db, { projectId: 42, userId: 7, permission: "write" });
  const temp = await writeTinyConfig();
  const config = await loadConfig({
    path: temp.path,
    overrides: { transport: "http" },
    env: { DATABASE_URL: tdb.url },
  });
  const app = await startApp(config, { generator });
  return {
    app,
    key: write.key,
    async close() {
      await app.shutdown();
      await tdb.close();
      await temp.remove();
    },
  };
}

Deno.test("http: initialize is answered while the engine starts; tools/list and calls wait for it", async () => {
  let start!: (g: Generator) => void;
  const s = await httpApp(new Promise<Generator>((r) => start = r));
  try {
    // connect() is initialize + notifications/initialized: answered with the engine not started.
    const client = await connectHttp(s.app.http!.port, { "MCP-API-Key": s.key });
    try {
      const listed = client.listTools();
      const called = client.callTool({
        name: "generate_image",
        arguments: { positive_prompt: "a red kite", size: "square_512" },
      });
      assert.equal(await pending(listed), true, "tools/list waits for the engine");
      assert.equal(await pending(called), true, "tools/call waits for the engine");
      start(grey);
      assert.deepEqual((await listed).tools.map((t) => t.name), IMAGE_TOOL_NAMES);
      const result = await called;
      assert.equal(result.isError, undefined);
      assert.equal(pngs(result).length, 1);
    } finally {
      await client.close();
    }
  } finally {
    await s.close();
  }
});

Deno.test("http: a failed start lists no tool, names the error and ends the app", async () => {
  let fail!: (e: Error) => void;
  const s = await httpApp(new Promise<Generator>((_, reject) => fail = reject));
  const finished = s.app.finished.then(() => "resolved", (e: Error) => e.message);
  try {
    const client = await connectHttp(s.app.http!.port, { "MCP-API-Key": s.key });
    try {
      const listed = client.listTools().then(() => "listed", (e: Error) => e.message);
      assert.equal(await pending(listed), true);
      fail(new Error("models/sd15/unet/model.onnx: sha256 differs from models.lock"));
      assert.match(await listed, /could not start its tools: .*unet\/model\.onnx: sha256 differs/);
    } finally {
      await client.close();
    }
    assert.equal(await finished, "models/sd15/unet/model.onnx: sha256 differs from models.lock");
  } finally {
    await s.close();
  }
});

Deno.test("stdio: the real program answers initialize, then a failing model check lists no tool and exits 1 with its message", async () => {
  const temp = await writeTinyConfig();
  try {
    // A models root without the files: the model check fails after initialize.
    await emptyModelsRoot(temp);
    const transport = new StdioClientTransport({
      command: Deno.execPath(),
      args: ["run", "-P=serve", "--quiet", "main.ts", "--config", temp.path],
      cwd: ROOT,
      env: { ...Deno.env.toObject(), NO_COLOR: "1" },
      stderr: "pipe",
    });
    let stderr = "";
    transport.stderr?.on("data", (c: Uint8Array) => stderr += new TextDecoder().decode(c));
    const exited = new Promise<void>((r) => transport.onclose = () => r());
    const client = new Client({ name: "startup-test", version: "1" });
    await client.connect(transport); // initialize answered
    assert.equal(client.getServerVersion()?.name, "generate-image-sd15-mcp");
    const listed = await client.listTools().then(
      (r) => `listed ${r.tools.length}`,
      (e: Error) => e.message,
    );
    // Either the error reply or the closed connection, whichever comes first: never a tool.
    assert.match(listed, /could not start its tools: .*missing|Connection closed/s);
    await exited;
    assert.match(stderr, /start-up failed: [^]*missing/);
    await client.close();
  } finally {
    await temp.remove();
  }
});

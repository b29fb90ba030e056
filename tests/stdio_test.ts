/**
 * End to end over real stdio: the SDK client talks to a spawned
 * `deno run -P=serve main.ts` on the test-sized model set.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readPngText } from "../mod/image/mod.ts";
import { CallToolResultSchema } from "../mod/mcp/client_sdk.ts";
import { connectStdio } from "./helpers/stdio_server.ts";
import { ROOT, TINY_CONFIG } from "./helpers/paths.ts";
import { contents, pngSize, texts } from "./helpers/results.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";
import { IMAGE_TOOL_NAMES } from "./helpers/tool_names.ts";
import { INITIALIZED, initializeRequest, jsonLines } from "./helpers/json_rpc.ts";

Deno.test("stdio: initialize, list tools, answer bad calls with isError, keep serving", async (t) => {
  const session = await connectStdio(["--config", TINY_CONFIG]);
  try {
    assert.equal(session.client.getServerVersion()?.name, "generate-image-sd15-mcp");

    await t.step("tools/list shows exactly the documented tools", async (t) => {
      const listed = await session.client.listTools();
      assert.deepEqual(listed.tools.map((tool) => tool.name), IMAGE_TOOL_NAMES);
      await t.assertSnapshot(listed);
    });

    await t.step("an empty prompt is a tool error naming the field", async () => {
      const result = await session.client.callTool({
        name: "generate_image",
        arguments: { positive_prompt: "   " },
      });
      assert.equal(result.isError, true);
      assert.match(texts(result), /positive_prompt: must not be empty/);
    });

    await t.step("a bad size and a bad control mode are tool errors", async () => {
      const bad = await session.client.callTool({
        name: "generate_image",
        arguments: { positive_prompt: "a cat", size: "huge" },
      });
      assert.equal(bad.isError, true);
      assert.match(texts(bad), /size: must be one of .* got "huge"/);
      const mode = await session.client.callTool({
        name: "generate_guided_image",
        arguments: { positive_prompt: "a cat", control_mode: "canny", input_image: "x" },
      });
      assert.equal(mode.isError, true);
      assert.match(texts(mode), /control_mode: must be one of .* got "canny"/);
    });

    await t.step("count outside 1..max_count is one tool error", async () => {
      for (const count of [0, -1, 5, 1.5]) {
        const result = await session.client.callTool({
          name: "generate_image",
          arguments: { positive_prompt: "a cat", count },
        });
        assert.equal(result.isError, true, `count ${count}`);
        assert.match(texts(result), /count: /);
        assert.equal(result.content instanceof Array && result.content.length, 1);
      }
    });

    await t.step("non-object arguments are a tool error, not a JSON-RPC error", async () => {
      const result = await session.client.request(
        { method: "tools/call", params: { name: "generate_image", arguments: [1, 2] as never } },
        CallToolResultSchema,
      );
      assert.equal(result.isError, true);
      assert.match(texts(result), /arguments: must be an object of named arguments, got an array/);
    });

    await t.step("an unknown tool is a JSON-RPC error, not a tool result", async () => {
      await assert.rejects(
        session.client.callTool({ name: "make_video", arguments: {} }),
        /Unknown tool: make_video/,
      );
    });

    await t.step(
      "a maximal request (two 36,000,000-character images) reaches validation",
      async () => {
        const image = "A".repeat(36_000_000);
        const result = await session.client.callTool(
          {
            name: "inpaint_image",
            arguments: { positive_prompt: "a vase", input_image: image, mask_image: image },
          },
          undefined,
          { timeout: 120_000 },
        );
        assert.equal(result.isError, true);
        assert.match(texts(result), /input_image/);
      },
    );

    await t.step("the server still serves after all of that", async () => {
      const listed = await session.client.listTools();
      assert.equal(listed.tools.length, IMAGE_TOOL_NAMES.length);
    });
  } finally {
    await session.close();
  }
});

Deno.test("stdio: generate_image returns one PNG with the five metadata keys and the preset that ran", async () => {
  const session = await connectStdio(["--config", TINY_CONFIG]);
  try {
    const progress: number[] = [];
    const result = await session.client.callTool(
      {
        name: "generate_image",
        arguments: { positive_prompt: "a red apple", size: "landscape_512" },
      },
      undefined,
      { onprogress: (p) => progress.push(p.progress), timeout: 120_000 },
    );
    assert.equal(result.isError, undefined, texts(result));
    const content = contents(result);
    assert.equal(content.length, 1);
    assert.equal(content[0].type, "image");
    assert.equal(content[0].mimeType, "image/png");
    const png = Uint8Array.fromBase64(content[0].data!);
    const meta = readPngText(png);
    assert.deepEqual(Object.keys(meta).sort(), [
      "clip_skip",
      "elapsed_seconds",
      "guidance_scale",
      "mode",
      "preset",
      "prompt",
      "prompt_syntax",
      "scheduler",
      "seed",
      "size",
      "steps",
      "timestamp",
      "vae_decoder",
    ]);
    // The prompt as given, and how it was read (AUTOMATIC1111's syntax by default); no negative
    // prompt was given, so none is recorded.
    assert.deepEqual(
      [meta.prompt, meta.prompt_syntax, meta.clip_skip],
      ["a red apple", "a1111", "1"],
    );
    // The tiny config's quality preset with its 4 steps.
    assert.deepEqual(
      [meta.preset, meta.scheduler, meta.steps, meta.guidance_scale, meta.vae_decoder],
      ["quality", "pndm", "4", "7.5", "full"],
    );
    assert.equal(meta.mode, "text_to_image");
    assert.equal(meta.size, "landscape_512");
    assert.match(meta.seed, /^\d+$/);
    assert.ok(Number(meta.seed) <= 4294967295);
    assert.match(meta.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.ok(Number(meta.elapsed_seconds) > 0);
    // 512x384: width and height from the IHDR chunk.
    assert.deepEqual(pngSize(png), [512, 384]);
    // One notification per denoising step (PNDM with 4 steps makes 5 UNet calls).
    assert.ok(progress.length >= 4, `progress: ${progress}`);
    assert.deepEqual(progress, [...progress].sort((a, b) => a - b));
  } finally {
    await session.close();
  }
});

Deno.test("stdio: an invalid config stops start-up with the file and the key, before any tool", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = join(dir, "bad.toml");
    await Deno.writeTextFile(path, `[generation]\nsteps = "many"\n`);
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-P=serve", "--quiet", "main.ts", "--config", path],
      cwd: ROOT,
      stdin: "null",
      env: { NO_COLOR: "1" },
    }).output();
    const stderr = new TextDecoder().decode(output.stderr);
    assert.notEqual(output.code, 0);
    assert.equal(output.stdout.length, 0, "nothing may reach stdout");
    assert.match(stderr, new RegExp(path.replaceAll("/", "\\/")));
    assert.match(stderr, /generation\.steps/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("stdio: a cancelled call (notifications/cancelled) stops at the next step", async () => {
  const temp = await writeTinyConfig(`[generation]\nsteps = 500\n`);
  const session = await connectStdio(["--config", temp.path]);
  try {
    const controller = new AbortController();
    let steps = 0;
    const call = session.client.callTool(
      { name: "generate_image", arguments: { positive_prompt: "a long one" } },
      undefined,
      {
        signal: controller.signal,
        onprogress: () => {
          if (++steps === 2) controller.abort("changed my mind");
        },
      },
    );
    await assert.rejects(call);
    // The server logs where it stopped; wait for that line.
    let line: RegExpMatchArray | null = null;
    for (let i = 0; i < 400 && !line; i++) {
      line = session.stderr().match(/\[generation\] cancelled .*"step":(\d+),"total":(\d+)/);
      if (!line) await new Promise((r) => setTimeout(r, 25));
    }
    assert.ok(line, `no cancellation logged:\n${session.stderr()}`);
    assert.ok(Number(line[1]) < Number(line[2]), `ran to the end: ${line[0]}`);
    // The server still answers after the cancellation.
    assert.equal((await session.client.listTools()).tools.length, IMAGE_TOOL_NAMES.length);
  } finally {
    await session.close();
    await temp.remove();
  }
});

Deno.test("stdio: a piped client that closes stdin after its call still gets the answer", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-P=serve", "--quiet", "main.ts", "--config", TINY_CONFIG],
    cwd: ROOT,
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
    env: { NO_COLOR: "1" },
  }).spawn();
  const lines = jsonLines([
    initializeRequest(1, "pipe"),
    INITIALIZED,
    {
      jsonrpc: "2.0",
      id: 2,
      method: "tools/call",
      params: { name: "generate_image", arguments: { positive_prompt: "a pipe" } },
    },
  ]);
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(lines));
  await writer.close();
  const output = await child.output();
  assert.equal(output.code, 0);
  const written: Array<
    { id?: unknown; method?: string; result: { content: Array<{ type: string }> } }
  > = new TextDecoder()
    .decode(output.stdout).trim().split("\n").map((l) => JSON.parse(l));
  // After stdin ends the server pings once (MCP ping) to learn whether stdout is still read.
  const probes = written.filter((l) => l.method === "ping");
  assert.equal(probes.length, 1);
  const replies = written.filter((l) => l.method === undefined);
  assert.deepEqual(replies.map((r) => r.id), [1, 2]);
  assert.equal(replies[1].result.content[0].type, "image");
});

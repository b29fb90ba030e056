/**
 * Both protocol eras over real stdio (a spawned `deno run -P=serve
 * main.ts` on the tiny models): a v2 SDK client pinned to 2026-07-28 lists
 * the tools, generates, runs a generation as a task to completion and
 * cancels another at a step boundary, and cancels a plain call with
 * `notifications/cancelled` (stdio has no stream to close); the v2 client's
 * 2025 handshake and the first stable v1 client (1.0, protocol 2024-11-05)
 * generate too. (The v1 1.32 client is the one of the other stdio tests.)
 */

import assert from "node:assert/strict";
import { ClientV1_0, StdioClientTransportV1_0 } from "../mod/mcp/client_sdk.ts";
import { readPngText } from "../mod/image/mod.ts";
import { teeChildLog } from "./helpers/log_secrets.ts";
import { callAsTask, cancelTask, connectStdioV2, getTask, pollTask } from "./helpers/mcp_v2.ts";
import { ROOT } from "./helpers/paths.ts";
import { pngs, pngSize, texts } from "./helpers/results.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";
import { IMAGE_TOOL_NAMES } from "./helpers/tool_names.ts";

async function until(condition: () => boolean | Promise<boolean>, label: string) {
  for (let i = 0; i < 800; i++) {
    if (await condition()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${label}`);
}

Deno.test("stdio 2026-07-28: a v2 client discovers, lists, generates, and runs a task to completion", async () => {
  const temp = await writeTinyConfig(`[generation]\nsteps = 4\n`);
  const session = await connectStdioV2(["--config", temp.path]);
  try {
    const client = session.client;
    assert.equal(client.getProtocolEra(), "modern");
    assert.ok(client.getServerCapabilities()?.extensions?.["io.modelcontextprotocol/tasks"]);
    const listed = await client.listTools();
    assert.deepEqual(listed.tools.map((t) => t.name), IMAGE_TOOL_NAMES);
    // This client declared the tasks extension but not MCP Apps: no view is named to it.
    assert.equal(listed.tools[0]._meta?.ui, undefined);

    // A tool that starts no job answers plainly even to a tasks-aware client.
    const none = await client.callTool({ name: "list_generations", arguments: {} });
    assert.match(texts(none), /No generation jobs/);

    const created = await callAsTask(session, {
      name: "generate_image",
      arguments: { positive_prompt: "a yellow lemon", size: "portrait_512" },
    });
    const done = await pollTask(session, created.taskId);
    assert.equal(done.status, "completed");
    const [png] = pngs(done.result);
    assert.deepEqual(pngSize(png), [384, 512]);
    assert.equal(readPngText(png).mode, "text_to_image");
    // Field-level tool errors come back as results, not tasks.
    const bad = await client.callTool({
      name: "generate_image",
      arguments: { positive_prompt: "" },
    });
    assert.equal(bad.isError, true);
    assert.match(texts(bad), /positive_prompt: must not be empty/);
  } finally {
    await session.close();
    await temp.remove();
  }
});

Deno.test("stdio 2026-07-28: tasks/cancel and notifications/cancelled stop the sampler at a step boundary", async () => {
  const temp = await writeTinyConfig(`[generation]\nsteps = 500\n`);
  const session = await connectStdioV2(["--config", temp.path]);
  try {
    const created = await callAsTask(session, {
      name: "generate_image",
      arguments: { positive_prompt: "a long one" },
    });
    await until(
      async () =>
        /running: step \d+/.test((await getTask(session, created.taskId)).statusMessage ?? ""),
      "the task to run",
    );
    await cancelTask(session, created.taskId);
    const ended = await pollTask(session, created.taskId);
    assert.equal(ended.status, "cancelled");
    const [, step, total] = /^cancelled at step (\d+) of (\d+)$/.exec(ended.statusMessage ?? "") ??
      [];
    assert.ok(Number(step) < Number(total), `ran to the end: ${ended.statusMessage}`);

    // A plain call of a client without tasks is cancelled by notifications/cancelled.
    const plain = await connectStdioV2(["--config", temp.path], { capabilities: {} });
    try {
      const controller = new AbortController();
      let steps = 0;
      const call = plain.client.callTool(
        { name: "generate_image", arguments: { positive_prompt: "another long one" } },
        {
          signal: controller.signal,
          onprogress: () => {
            if (++steps === 2) controller.abort("changed my mind");
          },
        },
      );
      await assert.rejects(call);
      let line: RegExpMatchArray | null = null;
      await until(() => {
        line = plain.stderr().match(/\[generation\] cancelled .*"step":(\d+),"total":(\d+)/);
        return line !== null;
      }, "the cancellation to be logged");
      const [, at, of] = line!;
      assert.ok(Number(at) < Number(of), `ran to the end: ${at} of ${of}`);
      assert.equal((await plain.client.listTools()).tools.length, IMAGE_TOOL_NAMES.length);
    } finally {
      await plain.close();
    }
  } finally {
    await session.close();
    await temp.remove();
  }
});

Deno.test("stdio 2025 era: the v2 client's initialize, and the v1 1.0 client (2024-11-05), generate", async () => {
  const temp = await writeTinyConfig(`[generation]\nsteps = 4\n`);
  try {
    const v2 = await connectStdioV2(["--config", temp.path], { era: "legacy" });
    try {
      assert.equal(v2.client.getProtocolEra(), "legacy");
      assert.deepEqual(v2.client.getServerCapabilities()?.tasks, {
        list: {},
        cancel: {},
        requests: { tools: { call: {} } },
      });
      const result = await v2.client.callTool({
        name: "generate_image",
        arguments: { positive_prompt: "an orange" },
      });
      assert.deepEqual(pngSize(pngs(result)[0]), [512, 512]);
    } finally {
      await v2.close();
    }

    // 1.0 has no `cwd`: the paths are absolute.
    const transport = new StdioClientTransportV1_0({
      command: Deno.execPath(),
      args: [
        "run",
        `--config=${ROOT}deno.json`,
        "-P=serve",
        "--quiet",
        `${ROOT}main.ts`,
        "--config",
        temp.path,
      ],
      env: { ...Deno.env.toObject(), NO_COLOR: "1" },
      stderr: "pipe",
    });
    let stderr = "";
    const old = new ClientV1_0({ name: "e2e-v1.0", version: "1.0.0" }, { capabilities: {} });
    await old.connect(transport);
    try {
      transport.stderr?.on(
        "data",
        (chunk: Uint8Array) => stderr += new TextDecoder().decode(chunk),
      );
      assert.equal(old.getServerVersion()?.name, "generate-image-sd15-mcp");
      const listed = await old.listTools();
      assert.deepEqual(listed.tools.map((t) => t.name), IMAGE_TOOL_NAMES);
      const result = await old.callTool({
        name: "generate_image",
        arguments: { positive_prompt: "a plum", size: "landscape_512" },
      });
      assert.equal(result.isError, undefined, texts(result));
      assert.deepEqual(pngSize(pngs(result)[0]), [512, 384]);
    } finally {
      await old.close();
      teeChildLog("stdio v1.0 client", stderr);
    }
  } finally {
    await temp.remove();
  }
});

/**
 * A stdio server whose client is gone cancels its work and exits, instead of
 * finishing a generation nobody will read: the client crashing (stdin ends
 * and stdout has no reader), or only stdout breaking while stdin stays open.
 * Ordering, not timing: the generation is long (500 steps), and the test
 * checks that the server exited with it cancelled, not done.
 */

import assert from "node:assert/strict";
import { ROOT } from "./helpers/paths.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";
import { INITIALIZED, initializeRequest, jsonLines } from "./helpers/json_rpc.ts";

const enc = new TextEncoder();

/** Spawns the server and sends initialize plus a long generate_image call with a progress token. */
async function startLongCall(configPath: string) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-P=serve", "--quiet", "main.ts", "--config", configPath],
    cwd: ROOT,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  let stderr = "";
  const stderrDone = child.stderr.pipeThrough(new TextDecoderStream()).pipeTo(
    new WritableStream({ write: (text) => void (stderr += text) }),
  );
  const writer = child.stdin.getWriter();
  const lines = [
    initializeRequest(1, "crashy"),
    INITIALIZED,
    {
      jsonrpc: "2.0",
      id: 2,
      method: "tools/call",
      params: {
        name: "generate_image",
        arguments: { positive_prompt: "a very long one" },
        _meta: { progressToken: "p" },
      },
    },
  ];
  await writer.write(enc.encode(jsonLines(lines)));
  // Read stdout until the first progress notification: the generation runs.
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  while (!out.includes(`"notifications/progress"`)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`stdout ended before any progress:\n${out}\n${stderr}`);
    out += value;
  }
  return { child, writer, reader, stderr: () => stderr, stderrDone };
}

Deno.test("stdio: a crashed client (stdin ended, stdout unread) gets its work cancelled and the server exits", async () => {
  const temp = await writeTinyConfig(`[generation]\nsteps = 500\n`, {
    shutdown_grace_seconds: 600,
  });
  try {
    const s = await startLongCall(temp.path);
    // The crash: both pipes close at once.
    await s.reader.cancel();
    await s.writer.close();
    const status = await s.child.status;
    await s.stderrDone;
    assert.equal(status.code, 0, s.stderr());
    assert.match(s.stderr(), /the stdio client is gone \(writing to stdout failed/);
    assert.match(s.stderr(), /\[generation\] cancelled/);
    assert.doesNotMatch(s.stderr(), /\[generation\] done/);
  } finally {
    await temp.remove();
  }
});

Deno.test("stdio: a client that stops reading stdout (stdin still open) gets its work cancelled", async () => {
  const temp = await writeTinyConfig(`[generation]\nsteps = 500\n`, {
    shutdown_grace_seconds: 600,
  });
  try {
    const s = await startLongCall(temp.path);
    // stdin stays open; the next progress notification cannot be written.
    await s.reader.cancel();
    const status = await s.child.status;
    await s.stderrDone;
    assert.equal(status.code, 0, s.stderr());
    assert.match(s.stderr(), /the stdio client is gone/);
    assert.match(s.stderr(), /\[generation\] cancelled/);
    assert.doesNotMatch(s.stderr(), /\[generation\] done/);
    await s.writer.close().catch(() => {});
  } finally {
    await temp.remove();
  }
});

/**
 * A stdio server whose client is gone cancels its work and exits, instead of
 * finishing a generation nobody will read: the client crashing (stdin ends
 * and stdout has no reader), only stdout breaking while stdin stays open, or
 * stdin closing right after a hand-off (nobody can call get_generation any
 * more). A call still open when stdin closes still gets its answer.
 * Ordering, not timing: the generation is long (500 steps), and the test
 * checks that the server exited with it cancelled, not done.
 */

import assert from "node:assert/strict";
import { readPngText } from "../mod/image/mod.ts";
import { ROOT } from "./helpers/paths.ts";
import { writeTinyConfig } from "./helpers/tiny_config.ts";
import { INITIALIZED, initializeRequest, jsonLines } from "./helpers/json_rpc.ts";

const enc = new TextEncoder();

/**
 * Spawns the server on `configPath` (stdio) and writes initialize and one
 * `generate_image` call with `args` (and `meta` as its `_meta`) to its stdin;
 * stderr is collected.
 */
function spawnWithCall(
  configPath: string,
  args: Record<string, unknown>,
  meta?: Record<string, unknown>,
) {
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
  const sent = writer.write(enc.encode(jsonLines([
    initializeRequest(1, "lifecycle"),
    INITIALIZED,
    {
      jsonrpc: "2.0",
      id: 2,
      method: "tools/call",
      params: { name: "generate_image", arguments: args, ...(meta ? { _meta: meta } : {}) },
    },
  ])));
  return { child, writer, sent, stderr: () => stderr, stderrDone };
}

/** Spawns the server and sends initialize plus a long generate_image call with a progress token. */
async function startLongCall(configPath: string) {
  const { child, writer, sent, stderr, stderrDone } = spawnWithCall(
    configPath,
    { positive_prompt: "a very long one" },
    { progressToken: "p" },
  );
  await sent;
  // Read stdout until the first progress notification: the generation runs.
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  while (!out.includes(`"notifications/progress"`)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`stdout ended before any progress:\n${out}\n${stderr()}`);
    out += value;
  }
  return { child, writer, reader, stderr, stderrDone };
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

/** Spawns the server, sends initialize plus one generate_image call, and collects stdout. */
function startCall(configPath: string, args: Record<string, unknown>) {
  const { child, writer, sent, stderr, stderrDone } = spawnWithCall(configPath, args);
  let stdout = "";
  const stdoutDone = child.stdout.pipeThrough(new TextDecoderStream()).pipeTo(
    new WritableStream({ write: (text) => void (stdout += text) }),
  );
  const replies = () =>
    stdout.trim().split("\n").filter(Boolean).map((l) => JSON.parse(l)).filter((m) =>
      m.method === undefined
    ) as Array<
      { id: number; result?: { content: Array<{ type: string; text?: string; data?: string }> } }
    >;
  return {
    child,
    writer,
    sent,
    replies,
    stderr,
    done: () => Promise.all([stderrDone, stdoutDone]),
  };
}

Deno.test("stdio: stdin closed right after a hand-off: the job nobody can fetch is cancelled and the server exits within 5 s", async () => {
  const temp = await writeTinyConfig(`[generation]\nsteps = 500\nmax_wait_seconds = 0.5\n`, {
    shutdown_grace_seconds: 600,
  });
  try {
    const s = startCall(temp.path, { positive_prompt: "handed off", count: 2 });
    await s.sent;
    while (!s.replies().some((r) => r.id === 2)) await new Promise((r) => setTimeout(r, 20));
    const handoff = s.replies().find((r) => r.id === 2)!;
    assert.match(handoff.result!.content[0].text!, /Call get_generation with job_id/);
    // The client goes away cleanly: stdin closes; nothing more can be asked.
    const closed = performance.now();
    await s.writer.close();
    const status = await s.child.status;
    const seconds = (performance.now() - closed) / 1000;
    await s.done();
    assert.equal(status.code, 0, s.stderr());
    assert.ok(seconds < 5, `exited ${seconds.toFixed(1)} s after stdin closed`);
    console.log(`exited ${seconds.toFixed(2)} s after stdin closed`);
    assert.match(s.stderr(), /cancelled generations nobody can fetch/);
    assert.match(s.stderr(), /\[generation\] cancelled/);
    assert.doesNotMatch(s.stderr(), /\[generation\] done/);
  } finally {
    await temp.remove();
  }
});

Deno.test("stdio: a call still open when stdin closes gets its image, even past max_wait_seconds", async () => {
  // About 1-3 s an image at 200 steps: well past the 0.3 s wait, so it would hand off. The
  // shutdown grace (stdin closed starts the shutdown) is far longer than that on any machine.
  const temp = await writeTinyConfig(`[generation]\nsteps = 200\nmax_wait_seconds = 0.3\n`, {
    shutdown_grace_seconds: 600,
  });
  try {
    const s = startCall(temp.path, { positive_prompt: "piped" });
    await s.sent;
    await s.writer.close();
    const status = await s.child.status;
    await s.done();
    assert.equal(status.code, 0, s.stderr());
    const reply = s.replies().find((r) => r.id === 2);
    assert.deepEqual(reply?.result?.content.map((c) => c.type), ["image"], JSON.stringify(reply));
    // It took longer than the wait: without stdin closed, this call would have handed off.
    const png = Uint8Array.fromBase64(reply!.result!.content[0].data!);
    assert.ok(Number(readPngText(png).elapsed_seconds) > 0.3, readPngText(png).elapsed_seconds);
  } finally {
    await temp.remove();
  }
});

/**
 * Decodes in their own process: the same pixels as in the server's
 * process, and a decode past its deadline is killed, not left running.
 */

import assert from "node:assert/strict";
import { type DecodeOrder, decodeOrder } from "./decode_child.ts";
import {
  childEnv,
  decodeIsolated,
  DecodeProcessFailure,
  holdSpareDecoders,
  spareDecoderPids,
} from "./decode_process.ts";
import { scanFloodJpeg } from "../../tests/fixtures/jpeg_fixtures.ts";
import { sharpLib as sharp } from "./sharp.ts";
import { ignoredFor } from "../../tests/helpers/ignore.ts";

/**
 * The deadline of decodes whose deadline is not what a test is about: far
 * beyond any decode here, so a busy machine slows them down without failing
 * them.
 */
const NOT_UNDER_TEST = 600_000;

function alive(pid: number): boolean {
  try {
    Deno.statSync(`/proc/${pid}`);
    return true;
  } catch {
    return false;
  }
}

Deno.test("a decode in its own process gives the pixels of an in-process decode", async () => {
  const pixels = new Uint8Array(40 * 30 * 4).map((_, i) => (i * 53) % 256);
  const png = new Uint8Array(
    await sharp(pixels, { raw: { width: 40, height: 30, channels: 4 } }).png().toBuffer(),
  );
  let pid = 0;
  for (const op of ["rgb", "gray"] as const) {
    const order = { op, sizes: [{ width: 24, height: 16 }] };
    const isolated = await decodeIsolated(order, png, {
      timeoutMs: NOT_UNDER_TEST,
      onSpawn: (p) => pid = p,
    });
    assert.ok(pid > 0 && pid !== Deno.pid, "it ran in another process");
    const local = await decodeOrder(order, png);
    assert.deepEqual(
      { ...isolated, data: [...isolated.data] },
      { ...local, data: [...local.data] },
    );
  }
});

Deno.test({
  ...ignoredFor(
    Deno.build.os === "linux" ? undefined : "not Linux (/proc shows whether the process is gone)",
    "a decode past its deadline is killed: the call fails at the deadline and no process is left",
  ),
  async fn() {
    // Thousands of scans over a 16-megapixel frame: libjpeg runs for seconds inside its input
    // pass, where libvips' own timeout is never checked (about 5 s on a 2-core x86-64 VM).
    const jpeg = scanFloodJpeg({ size: 4096, acScans: 3000 });
    const order: DecodeOrder = { op: "rgb", sizes: [{ width: 64, height: 64 }] };
    // The yardstick is a witness, not a number of milliseconds: a decode of half the scans,
    // started at the same moment with no deadline in reach. The call past its deadline must
    // fail while the witness still decodes: had it waited for its own decode (twice the work)
    // to end, the witness would have ended first, on a fast machine or a busy one alike.
    let witnessPid = 0;
    let witnessEnded = false;
    const witness = decodeIsolated(order, scanFloodJpeg({ size: 4096, acScans: 1500 }), {
      timeoutMs: NOT_UNDER_TEST,
      onSpawn: (p) => witnessPid = p,
    }).then(() => "decoded", (e: Error) => e.message).finally(() => witnessEnded = true);
    let pid = 0;
    try {
      await assert.rejects(
        decodeIsolated(order, jpeg, { timeoutMs: 700, onSpawn: (p) => pid = p }),
        /^Error: timeout: still decoding after 700 ms; its process was stopped$/,
      );
      assert.equal(
        witnessEnded,
        false,
        `a decode of half the work ended before the call past its deadline failed: ${await witness}`,
      );
      assert.ok(pid > 0);
      assert.equal(alive(pid), false, `decode process ${pid} is still there`);
    } finally {
      if (witnessPid > 0 && alive(witnessPid)) Deno.kill(witnessPid, "SIGKILL");
      await witness;
    }
  },
});

Deno.test("a decode process that dies without answering is an error naming how it ended", async () => {
  const jpeg = scanFloodJpeg({ size: 2048, acScans: 2000 });
  await assert.rejects(
    decodeIsolated({ op: "gray", sizes: [{ width: 8, height: 8 }] }, jpeg, {
      timeoutMs: NOT_UNDER_TEST,
      onSpawn: (pid) => Deno.kill(pid, "SIGKILL"),
    }),
    (error: unknown) =>
      error instanceof DecodeProcessFailure && error.started &&
      /^the decode process ended without an answer \(signal SIGKILL\)$/.test(error.message),
  );
});

Deno.test({
  ...ignoredFor(
    Deno.build.os === "linux"
      ? undefined
      : "not Linux (/proc shows whether the processes are gone)",
    "held spare decoders start at the first decode, serve the next ones, and stop on release",
  ),
  async fn() {
    const png = new Uint8Array(
      await sharp({ create: { width: 8, height: 8, channels: 3, background: "#808080" } })
        .png().toBuffer(),
    );
    const order = { op: "gray" as const, sizes: [{ width: 4, height: 4 }] };
    const release = holdSpareDecoders(2);
    try {
      assert.deepEqual(spareDecoderPids(), [], "none before the first decode");
      let first = 0;
      await decodeIsolated(order, png, { timeoutMs: NOT_UNDER_TEST, onSpawn: (p) => first = p });
      const waiting = spareDecoderPids();
      assert.equal(waiting.length, 2);
      assert.ok(!waiting.includes(first));
      let second = 0;
      const pixels = await decodeIsolated(order, png, {
        timeoutMs: NOT_UNDER_TEST,
        onSpawn: (p) => second = p,
      });
      assert.equal(second, waiting[0], "the next decode ran in a spare");
      assert.ok(pixels.data.every((v) => v === 128));
      assert.equal(spareDecoderPids().length, 2, "the spare taken was replaced");
    } finally {
      const left = spareDecoderPids();
      await release();
      assert.deepEqual(spareDecoderPids(), []);
      for (const pid of left) assert.equal(alive(pid), false, `spare ${pid} still runs`);
    }
  },
});

Deno.test("a decode process gets only the cache and temp variables, never a secret or LD_*", () => {
  const server: Record<string, string> = {
    HOME: "/home/sd",
    DENO_DIR: "/cache/deno",
    TMPDIR: "/tmp/x",
    DATABASE_URL: "postgres://u:secret@db/x",
    CLOUDFRONT_SECRET_HEADER: "s",
    BACKEND_INTERNAL_API_KEY: "k",
    PGPASSWORD: "p",
    LD_LIBRARY_PATH: "/usr/lib/chromium",
    LD_PRELOAD: "/x.so",
  };
  assert.deepEqual(childEnv((name) => server[name]), {
    DENO_NO_UPDATE_CHECK: "1",
    HOME: "/home/sd",
    DENO_DIR: "/cache/deno",
    TMPDIR: "/tmp/x",
  });
  const refused = childEnv((name) => {
    if (name === "HOME") throw new Deno.errors.NotCapable("no env access to HOME");
    return server[name];
  });
  assert.equal(refused.HOME, undefined, "an unreadable variable is left out, not an error");
});

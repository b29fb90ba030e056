import { deepStrictEqual, match, ok, strictEqual } from "node:assert";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { downloadModelFiles, type DownloadOptions } from "./download.ts";
import { HostUnreachableError } from "./fetch_failure.ts";
import { type Behavior, startFixtureServer } from "../../tests/helpers/fixture_server.ts";
import type { LockEntry } from "./lock.ts";

/** Deterministic pseudo-random bytes (xorshift32), so the content has no structure. */
function fixtureBytes(n: number, seed = 0x9e3779b9): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

const CONTENT = fixtureBytes(300_000);
const SHA = createHash("sha256").update(CONTENT).digest("hex");

function entry(url: string, over: Partial<LockEntry> = {}): LockEntry {
  return {
    component: "unet",
    path: "sd15/unet/weights.pb",
    url,
    size: CONTENT.length,
    sha256: SHA,
    ...over,
  };
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

/** Runs `fn` with a temp root and a fixture server; always cleans up. */
async function withServer(
  behave: ((n: number) => Behavior) | undefined,
  fn: (
    ctx: { root: string; url: string; requests: { range: string | null; status: number }[] },
  ) => Promise<void>,
  content: Uint8Array = CONTENT,
): Promise<void> {
  const root = await Deno.makeTempDir({ prefix: "models_dl_" });
  const server = await startFixtureServer(content, behave);
  try {
    await fn({ root, url: server.url, requests: server.requests });
  } finally {
    await server.close();
    await Deno.remove(root, { recursive: true });
  }
}

const quiet: Partial<DownloadOptions> = { progress: false, retryDelayMs: () => 0 };

Deno.test("download: fresh download lands verified under the final name", async () => {
  await withServer(undefined, async ({ root, url, requests }) => {
    const report = await downloadModelFiles({ root, entries: [entry(url)], ...quiet });
    deepStrictEqual(report.failed, []);
    strictEqual(report.files[0].status, "downloaded");
    const final = join(root, "sd15/unet/weights.pb");
    deepStrictEqual(await Deno.readFile(final), CONTENT);
    strictEqual(await exists(`${final}.partial`), false);
    deepStrictEqual(requests, [{ range: null, status: 200 }]);
    // The verification cache records the file for cheap start-up checks.
    const cache = JSON.parse(await Deno.readTextFile(join(root, ".verified.json")));
    strictEqual(cache.files["sd15/unet/weights.pb"].sha256, SHA);
    strictEqual(cache.files["sd15/unet/weights.pb"].size, CONTENT.length);
  });
});

Deno.test("download: a connection cut mid-body is resumed with Range", async () => {
  const behave = (n: number): Behavior =>
    n === 1 ? { kind: "cut", after: 100_000 } : { kind: "normal" };
  await withServer(behave, async ({ root, url, requests }) => {
    const report = await downloadModelFiles({ root, entries: [entry(url)], ...quiet });
    deepStrictEqual(report.failed, []);
    deepStrictEqual(await Deno.readFile(join(root, "sd15/unet/weights.pb")), CONTENT);
    strictEqual(requests.length, 2);
    strictEqual(requests[0].range, null);
    // The resume asks for exactly the bytes that had not arrived.
    const resumedAt = Number(requests[1].range?.match(/^bytes=(\d+)-$/)?.[1]);
    strictEqual(resumedAt, 100_000);
    strictEqual(requests[1].status, 206);
    strictEqual(await exists(join(root, "sd15/unet/weights.pb.partial")), false);
  });
});

Deno.test("download: a partial file left by an earlier run is resumed", async () => {
  await withServer(undefined, async ({ root, url, requests }) => {
    const final = join(root, "sd15/unet/weights.pb");
    await Deno.mkdir(join(root, "sd15/unet"), { recursive: true });
    await Deno.writeFile(`${final}.partial`, CONTENT.subarray(0, 123_456));
    const report = await downloadModelFiles({ root, entries: [entry(url)], ...quiet });
    deepStrictEqual(report.failed, []);
    deepStrictEqual(requests, [{ range: "bytes=123456-", status: 206 }]);
    deepStrictEqual(await Deno.readFile(final), CONTENT);
  });
});

Deno.test("download: a server that ignores Range (200) restarts from byte 0", async () => {
  await withServer(() => ({ kind: "ignore_range" }), async ({ root, url, requests }) => {
    const final = join(root, "sd15/unet/weights.pb");
    await Deno.mkdir(join(root, "sd15/unet"), { recursive: true });
    // A wrong prefix: appending to it would corrupt the file, so this proves the restart.
    await Deno.writeFile(`${final}.partial`, fixtureBytes(50_000, 7));
    const report = await downloadModelFiles({ root, entries: [entry(url)], ...quiet });
    deepStrictEqual(report.failed, []);
    deepStrictEqual(requests, [{ range: "bytes=50000-", status: 200 }]);
    deepStrictEqual(await Deno.readFile(final), CONTENT);
  });
});

Deno.test("download: wrong bytes → sha256 mismatch, nothing under the final name, partial removed", async () => {
  const wrong = fixtureBytes(CONTENT.length, 12345);
  const wrongSha = createHash("sha256").update(wrong).digest("hex");
  await withServer(() => ({ kind: "serve", bytes: wrong }), async ({ root, url }) => {
    const report = await downloadModelFiles({ root, entries: [entry(url)], ...quiet });
    strictEqual(report.failed.length, 1);
    strictEqual(report.failed[0].path, "sd15/unet/weights.pb");
    const error = report.failed[0].error ?? "";
    ok(error.includes(`expected ${SHA}`), error);
    ok(error.includes(`got ${wrongSha}`), error);
    const final = join(root, "sd15/unet/weights.pb");
    strictEqual(await exists(final), false);
    strictEqual(await exists(`${final}.partial`), false);
  });
});

Deno.test("download: a file already present and correct is skipped without a request", async () => {
  await withServer(undefined, async ({ root, url, requests }) => {
    const final = join(root, "sd15/unet/weights.pb");
    await Deno.mkdir(join(root, "sd15/unet"), { recursive: true });
    await Deno.writeFile(final, CONTENT);
    const report = await downloadModelFiles({ root, entries: [entry(url)], ...quiet });
    deepStrictEqual(report.files, [{ path: "sd15/unet/weights.pb", status: "present" }]);
    strictEqual(requests.length, 0);
  });
});

Deno.test("download: a present file with wrong content is downloaded again", async () => {
  await withServer(undefined, async ({ root, url, requests }) => {
    const final = join(root, "sd15/unet/weights.pb");
    await Deno.mkdir(join(root, "sd15/unet"), { recursive: true });
    await Deno.writeFile(final, fixtureBytes(CONTENT.length, 99));
    const report = await downloadModelFiles({ root, entries: [entry(url)], ...quiet });
    strictEqual(report.files[0].status, "downloaded");
    strictEqual(requests.length, 1);
    deepStrictEqual(await Deno.readFile(final), CONTENT);
  });
});

Deno.test("download: transient HTTP errors are retried, permanent ones are not", async () => {
  const flaky = (n: number): Behavior =>
    n <= 2 ? { kind: "status", status: 503 } : { kind: "normal" };
  await withServer(flaky, async ({ root, url, requests }) => {
    const report = await downloadModelFiles({ root, entries: [entry(url)], ...quiet });
    deepStrictEqual(report.failed, []);
    deepStrictEqual(requests.map((r) => r.status), [503, 503, 200]);
  });
  await withServer(() => ({ kind: "status", status: 404 }), async ({ root, url, requests }) => {
    const report = await downloadModelFiles({ root, entries: [entry(url)], ...quiet });
    strictEqual(report.failed.length, 1);
    match(report.failed[0].error ?? "", /HTTP 404/);
    strictEqual(requests.length, 1);
  });
});

Deno.test("download: retries are bounded", async () => {
  await withServer(() => ({ kind: "status", status: 500 }), async ({ root, url, requests }) => {
    const report = await downloadModelFiles({
      root,
      entries: [entry(url)],
      ...quiet,
      maxAttempts: 3,
    });
    strictEqual(report.failed.length, 1);
    match(report.failed[0].error ?? "", /giving up after 3 failed attempts/);
    strictEqual(requests.length, 3);
  });
});

Deno.test("download: a stalled response is aborted and resumed", async () => {
  const behave = (n: number): Behavior =>
    n === 1 ? { kind: "stall", after: 70_000 } : { kind: "normal" };
  await withServer(behave, async ({ root, url, requests }) => {
    const report = await downloadModelFiles({
      root,
      entries: [entry(url)],
      ...quiet,
      stallTimeoutMs: 300,
    });
    deepStrictEqual(report.failed, []);
    strictEqual(requests[1].range, "bytes=70000-");
    deepStrictEqual(await Deno.readFile(join(root, "sd15/unet/weights.pb")), CONTENT);
  });
});

Deno.test("download: a size that disagrees with the lock is refused", async () => {
  await withServer(undefined, async ({ root, url }) => {
    const report = await downloadModelFiles({
      root,
      entries: [entry(url, { size: CONTENT.length + 1 })],
      ...quiet,
    });
    strictEqual(report.failed.length, 1);
    match(report.failed[0].error ?? "", /server reports 300000 bytes but models\.lock says 300001/);
    strictEqual(await exists(join(root, "sd15/unet/weights.pb")), false);
  });
});

Deno.test("download: fixture:// entries are reported, not fetched", async () => {
  const root = await Deno.makeTempDir({ prefix: "models_dl_" });
  try {
    const report = await downloadModelFiles({
      root,
      entries: [entry("fixture://tiny/unet/model.onnx")],
      ...quiet,
    });
    strictEqual(report.failed.length, 1);
    match(report.failed[0].error ?? "", /fixture:\/\/tiny\/unet\/model\.onnx is built locally/);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("download: progress is drawn on the injected writer", async () => {
  await withServer(undefined, async ({ root, url }) => {
    const lines: string[] = [];
    const report = await downloadModelFiles({
      root,
      entries: [entry(url)],
      retryDelayMs: () => 0,
      progress: { write: (t) => lines.push(t), tty: true },
    });
    deepStrictEqual(report.failed, []);
    const last = lines[lines.length - 1];
    ok(last.startsWith("\r[1/1] sd15/unet/weights.pb  292.97 KiB / 292.97 KiB  100.0%"), last);
    ok(last.endsWith("\n"), "the final redraw ends the line");
  });
});

/** A port on 127.0.0.1 that nothing listens on (bound, then closed). */
function closedPort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** A fetch that counts its calls. */
function countingFetch(): { fetch: typeof fetch; calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    fetch: (input, init) => {
      calls.push(String(input));
      return fetch(input, init);
    },
  };
}

/** Runs the download, which must end with a {@link HostUnreachableError}; returns it. */
async function unreachable(
  root: string,
  entries: LockEntry[],
  fetch: typeof globalThis.fetch,
): Promise<HostUnreachableError> {
  let error: unknown;
  try {
    await downloadModelFiles({ ...quiet, root, entries, fetch });
  } catch (e) {
    error = e;
  }
  ok(error instanceof HostUnreachableError, String(error));
  return error;
}

Deno.test("download: a refused connection on the first request ends the run, no retries", async () => {
  const root = await Deno.makeTempDir({ prefix: "models_dl_" });
  try {
    const port = closedPort();
    const counted = countingFetch();
    const entries = [
      entry(`http://127.0.0.1:${port}/a`),
      entry(`http://127.0.0.1:${port}/b`, { path: "sd15/unet/model.onnx" }),
    ];
    const error = await unreachable(root, entries, counted.fetch);
    strictEqual(counted.calls.length, 1, "one request, no retry, the second file not tried");
    strictEqual(error.host, `127.0.0.1:${port}`);
    strictEqual(error.reason, "connection refused");
    ok(!error.message.includes("\n"), "one line");
    for (const part of [`127.0.0.1:${port}`, "HTTPS_PROXY", "NO_PROXY", "models add"]) {
      ok(error.message.includes(part), `${part} in: ${error.message}`);
    }
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("download: a TLS failure on the first request ends the run, no retries", async () => {
  // A plain-TCP loopback server that answers a TLS ClientHello with HTTP text.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  let connections = 0;
  const serving = (async () => {
    for await (const conn of listener) {
      connections++;
      await conn.write(new TextEncoder().encode("HTTP/1.1 400 Bad Request\r\n\r\n")).catch(
        () => {},
      );
      conn.close();
    }
  })();
  const root = await Deno.makeTempDir({ prefix: "models_dl_" });
  try {
    const counted = countingFetch();
    const error = await unreachable(
      root,
      [entry(`https://127.0.0.1:${port}/file`)],
      counted.fetch,
    );
    strictEqual(error.reason, "TLS error");
    strictEqual(counted.calls.length, 1);
    strictEqual(connections, 1, "one connection, no retry");
  } finally {
    listener.close();
    await serving.catch(() => {});
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("download: a DNS failure on the first request ends the run", async () => {
  const root = await Deno.makeTempDir({ prefix: "models_dl_" });
  try {
    const counted = countingFetch();
    // RFC 6761: .invalid never resolves.
    const error = await unreachable(
      root,
      [entry("https://models.example.invalid/file")],
      counted.fetch,
    );
    strictEqual(error.host, "models.example.invalid");
    strictEqual(counted.calls.length, 1);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("download: a host that answered before is retried when a later request cannot connect", async () => {
  await withServer(() => ({ kind: "normal" }), async ({ root, url }) => {
    const port = closedPort();
    let n = 0;
    // The first request reaches the server; later ones to the same host fail to
    // connect twice (an interruption), then succeed.
    const flaky: typeof fetch = (input, init) => {
      n++;
      if (n === 2 || n === 3) {
        return fetch(`http://127.0.0.1:${port}/x`, init);
      }
      return fetch(input, init);
    };
    const report = await downloadModelFiles({
      ...quiet,
      root,
      fetch: flaky,
      entries: [entry(url), entry(url, { path: "sd15/unet/copy.pb" })],
    });
    deepStrictEqual(report.failed, []);
    strictEqual(n, 4, "1 + 2 failed retries + 1");
  });
});

Deno.test("download: a local entry (no url) is verified, never fetched", async () => {
  const root = await Deno.makeTempDir({ prefix: "models_dl_" });
  try {
    const counted = countingFetch();
    const local: LockEntry = {
      component: "unet",
      path: "own/unet/model.onnx",
      size: 3,
      sha256: SHA,
    };
    const report = await downloadModelFiles({
      ...quiet,
      root,
      entries: [local],
      fetch: counted.fetch,
    });
    strictEqual(counted.calls.length, 0);
    strictEqual(report.failed.length, 1);
    match(report.failed[0].error!, /missing; expected at .*own\/unet\/model\.onnx.*local file/);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

/**
 * Downloads the files of models.lock that are missing or wrong.
 *
 * For each file: bytes stream into `<final>.partial` while sha256 is computed
 * on the fly; an interrupted transfer resumes with an HTTP `Range` request
 * (206 appends, 200 means the server ignored the range and the file restarts
 * from byte 0); only a file whose size and sha256 match the lock is renamed
 * to its final name, so a final name never holds partial or corrupt bytes.
 * A hash mismatch deletes the partial file and is reported with both hashes.
 * Transient failures (cut connections, stalls, HTTP 408/425/429/5xx) are
 * retried with backoff a bounded number of times. A host that cannot be
 * reached at all — DNS failure, refused connection, TLS error or no answer on
 * the first request to it — is not retried: `HostUnreachableError` (fetch_failure.ts) ends
 * the whole run at once. Entries without a `url` (local files) are verified,
 * never downloaded.
 *
 * @module
 */

import { createHash, type Hash } from "node:crypto";
import { dirname, join } from "node:path";
import { log } from "../log/mod.ts";
import type { LockEntry } from "./lock.ts";
import { ProgressLine, type ProgressOptions } from "./progress.ts";
import {
  connectFailure,
  errorChain,
  hostInError,
  HostUnreachableError,
  PermanentError,
  TRANSIENT_STATUS,
  TransientError,
} from "./fetch_failure.ts";
import { type ProxyChoice, proxyFor, readEnv } from "./proxy.ts";
import { hashFileInto, sha256File } from "../bytes/mod.ts";
import {
  cachedSha256,
  loadVerifyCache,
  saveVerifyCache,
  type VerifyCache,
} from "./verify_cache.ts";
import { statOrNull } from "./stat_or_null.ts";

/** What to download and how. */
export interface DownloadOptions {
  /** The models root; entry paths are relative to it. */
  root: string;
  /** Entries to make present. */
  entries: readonly LockEntry[];
  /** Verification cache; default `<root>/.verified.json` (shared with start-up verification). */
  cacheFile?: string;
  /** fetch implementation; default global fetch. */
  fetch?: typeof fetch;
  /** Failed attempts in a row (without new bytes) before a file is given up; default 6. */
  maxAttempts?: number;
  /** Wait before retry number `n` (1-based); default 1 s, 2 s, 4 s … capped at 30 s. */
  retryDelayMs?: (n: number) => number;
  /** Abort a response that delivers no bytes for this long; default 60 s. */
  stallTimeoutMs?: number;
  /** The first request to a host must be answered within this; default 10 s. */
  connectTimeoutMs?: number;
  /** Progress line options, or false for none. */
  progress?: ProgressOptions | false;
  /** Aborting stops at once; the partial file stays for the next resume. */
  signal?: AbortSignal;
  /** Reads an environment variable (the proxy settings); default the process's. */
  env?: (name: string) => string | undefined;
}

/** Result for one file. */
export interface FileOutcome {
  /** Lock path. */
  path: string;
  /** `present`: already correct; `downloaded`: fetched and verified; `failed`: see `error`. */
  status: "present" | "downloaded" | "failed";
  /** Why it failed. */
  error?: string;
}

/** Result of a whole run. */
export interface DownloadReport {
  /** One outcome per entry, in lock order. */
  files: FileOutcome[];
  /** The failed ones. */
  failed: FileOutcome[];
}

/** Download state of one file: the hash covers exactly the `offset` bytes in the partial file. */
interface PartialState {
  hash: Hash;
  offset: number;
}

async function removeIfExists(path: string): Promise<void> {
  try {
    await Deno.remove(path);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
}

function abortableDelay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

async function writeAll(file: Deno.FsFile, data: Uint8Array): Promise<void> {
  let written = 0;
  while (written < data.length) written += await file.write(data.subarray(written));
}

/**
 * Makes the partial file consistent with the lock: bytes beyond the expected
 * size mean it is not a prefix of this file, so it is dropped; otherwise its
 * bytes are hashed so the download can resume.
 */
async function preparePartial(partial: string, entry: LockEntry): Promise<PartialState> {
  const hash = createHash("sha256");
  const stat = await statOrNull(partial);
  if (!stat) return { hash, offset: 0 };
  if (!stat.isFile || stat.size > entry.size) {
    log("warn", "models", "discarding a partial download larger than the expected size", {
      path: entry.path,
      partialSize: stat.size,
      expected: entry.size,
    });
    await Deno.remove(partial, { recursive: true });
    return { hash, offset: 0 };
  }
  const offset = await hashFileInto(hash, partial, stat.size);
  if (offset === entry.size && hash.copy().digest("hex") !== entry.sha256) {
    // A complete leftover that does not verify cannot be resumed: start over.
    log("warn", "models", "discarding a complete partial download with the wrong sha256", {
      path: entry.path,
    });
    await Deno.remove(partial);
    return { hash: createHash("sha256"), offset: 0 };
  }
  if (offset > 0) {
    log("info", "models", "resuming partial download", { path: entry.path, offset });
  }
  return { hash, offset };
}

/** Parses `Content-Range: bytes start-end/total`. */
function parseContentRange(
  value: string | null,
): { start: number; total: number | null } | null {
  const m = value?.match(/^bytes\s+(\d+)-(\d+)\/(\d+|\*)$/i);
  if (!m) return null;
  return { start: Number(m[1]), total: m[3] === "*" ? null : Number(m[3]) };
}

/** Context shared by the attempts of one run. */
interface RunContext {
  fetch: typeof fetch;
  stallTimeoutMs: number;
  connectTimeoutMs: number;
  signal?: AbortSignal;
  /** Hosts that answered at least once in this run. */
  reached: Set<string>;
  /** The proxy fetch goes through for a URL (named when a host cannot be reached). */
  proxy: (url: URL) => ProxyChoice | undefined;
}

/**
 * One HTTP attempt: requests the missing bytes and appends them to the
 * partial file, updating `state` as bytes land, so that after any error
 * `state` still describes the file exactly.
 */
async function fetchInto(
  entry: LockEntry,
  partial: string,
  state: PartialState,
  ctx: RunContext,
  progress: ProgressLine | null,
): Promise<void> {
  const controller = new AbortController();
  const onOuterAbort = () => controller.abort(ctx.signal!.reason);
  ctx.signal?.addEventListener("abort", onOuterAbort, { once: true });
  const url = entry.url!;
  const host = new URL(url).host;
  const firstContact = !ctx.reached.has(host);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arm = (ms = ctx.stallTimeoutMs) => {
    clearTimeout(timer);
    timer = setTimeout(
      () => controller.abort(new TransientError(`no data for ${ms} ms`)),
      ms,
    );
  };
  let file: Deno.FsFile | undefined;
  try {
    arm(firstContact ? Math.min(ctx.connectTimeoutMs, ctx.stallTimeoutMs) : ctx.stallTimeoutMs);
    // identity: byte ranges and Content-Length must refer to the file's own
    // bytes, not to a gzip/br transfer encoding that fetch would undo.
    const headers: Record<string, string> = { "Accept-Encoding": "identity" };
    if (state.offset > 0) headers.Range = `bytes=${state.offset}-`;
    let res: Response;
    try {
      res = await ctx.fetch(url, { headers, signal: controller.signal, redirect: "follow" });
    } catch (e) {
      if (ctx.signal?.aborted) throw ctx.signal.reason;
      const timedOut = controller.signal.reason instanceof TransientError;
      const text = timedOut ? controller.signal.reason.message : errorChain(e);
      if (firstContact) {
        const proxy = ctx.proxy(new URL(url));
        if (timedOut) {
          throw new HostUnreachableError(
            host,
            "no answer",
            `nothing within ${ctx.connectTimeoutMs} ms`,
            proxy,
          );
        }
        const reason = connectFailure(text);
        if (reason) {
          // The URL is long and the host is named already: keep the cause.
          const detail = text.replace(/^.*?error sending request for url \([^)]*\): /, "");
          throw new HostUnreachableError(hostInError(text, host), reason, detail, proxy);
        }
      }
      throw new TransientError(`request failed: ${text}`);
    }
    ctx.reached.add(host);
    try {
      ctx.reached.add(new URL(res.url).host);
    } catch {
      // a test fetch without a response URL
    }
    arm();
    let append: boolean;
    if (res.status === 206 && state.offset > 0) {
      const range = parseContentRange(res.headers.get("content-range"));
      if (range === null || range.start !== state.offset) {
        const message = `server answered Range bytes=${state.offset}- with Content-Range ` +
          `${JSON.stringify(res.headers.get("content-range"))}; restarting from byte 0`;
        await res.body?.cancel();
        await removeIfExists(partial);
        state.hash = createHash("sha256");
        state.offset = 0;
        throw new TransientError(message);
      }
      if (range.total !== null && range.total !== entry.size) {
        await res.body?.cancel();
        throw new PermanentError(
          `server reports ${range.total} bytes but models.lock says ${entry.size}`,
        );
      }
      append = true;
    } else if (res.status === 200 || res.status === 206) {
      if (state.offset > 0) {
        log("info", "models", "server ignored the Range request; restarting from byte 0", {
          path: entry.path,
        });
      }
      const length = res.headers.get("content-length");
      const encoding = res.headers.get("content-encoding");
      const encoded = encoding !== null && encoding.toLowerCase() !== "identity";
      if (res.status === 200 && !encoded && length !== null && Number(length) !== entry.size) {
        await res.body?.cancel();
        throw new PermanentError(
          `server reports ${length} bytes but models.lock says ${entry.size}`,
        );
      }
      state.hash = createHash("sha256");
      state.offset = 0;
      append = false;
    } else if (res.status === 416) {
      await res.body?.cancel();
      await removeIfExists(partial);
      state.hash = createHash("sha256");
      state.offset = 0;
      throw new TransientError("server rejected the resume range (HTTP 416); restarting");
    } else {
      await res.body?.cancel();
      const what = `HTTP ${res.status} ${res.statusText} from ${url}`.trim();
      if (TRANSIENT_STATUS.has(res.status)) throw new TransientError(what);
      throw new PermanentError(what);
    }
    if (!res.body) throw new TransientError("response has no body");

    file = await Deno.open(partial, {
      write: true,
      create: true,
      append,
      truncate: !append,
    });
    const reader = res.body.getReader();
    while (true) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (e) {
        if (ctx.signal?.aborted) throw ctx.signal.reason;
        const reason = controller.signal.reason instanceof TransientError
          ? controller.signal.reason.message
          : errorChain(e);
        throw new TransientError(
          `connection lost at ${state.offset} of ${entry.size} bytes: ${reason}`,
        );
      }
      if (chunk.done) break;
      arm();
      const bytes = chunk.value;
      if (state.offset + bytes.length > entry.size) {
        await reader.cancel();
        file.close();
        file = undefined;
        await removeIfExists(partial);
        state.hash = createHash("sha256");
        state.offset = 0;
        throw new PermanentError(
          `server sent more than the ${entry.size} bytes models.lock expects; the download was deleted`,
        );
      }
      await writeAll(file, bytes);
      state.hash.update(bytes);
      state.offset += bytes.length;
      progress?.update(state.offset);
    }
    if (state.offset < entry.size) {
      throw new TransientError(
        `connection closed at ${state.offset} of ${entry.size} bytes`,
      );
    }
  } finally {
    clearTimeout(timer);
    ctx.signal?.removeEventListener("abort", onOuterAbort);
    file?.close();
  }
}

/** Records a verified file in the cache and saves it. */
async function remember(
  cache: VerifyCache,
  cacheFile: string,
  entry: LockEntry,
  abs: string,
): Promise<void> {
  const stat = await Deno.stat(abs);
  const mtimeMs = stat.mtime?.getTime();
  if (mtimeMs === undefined) return;
  cache.files[entry.path] = { size: stat.size, mtimeMs, sha256: entry.sha256 };
  await saveVerifyCache(cacheFile, cache);
}

/** Checks whether the final file is already right; removes it when it is wrong. */
async function alreadyPresent(
  entry: LockEntry,
  abs: string,
  cache: VerifyCache,
  cacheFile: string,
): Promise<boolean> {
  const stat = await statOrNull(abs);
  if (!stat) return false;
  if (!stat.isFile) {
    throw new PermanentError(`${abs} exists but is not a regular file; move it away`);
  }
  if (stat.size !== entry.size) {
    log("warn", "models", "existing file has the wrong size; downloading it again", {
      path: entry.path,
      size: stat.size,
      expected: entry.size,
    });
    await Deno.remove(abs);
    return false;
  }
  const mtimeMs = stat.mtime?.getTime() ?? null;
  let actual = cachedSha256(cache, entry.path, stat.size, mtimeMs);
  if (actual === undefined) {
    log("info", "models", "checking existing file", { path: entry.path });
    actual = await sha256File(abs);
    if (mtimeMs !== null) {
      cache.files[entry.path] = { size: stat.size, mtimeMs, sha256: actual };
      await saveVerifyCache(cacheFile, cache);
    }
  }
  if (actual === entry.sha256) return true;
  log("warn", "models", "existing file has the wrong sha256; downloading it again", {
    path: entry.path,
    actual,
    expected: entry.sha256,
  });
  await Deno.remove(abs);
  return false;
}

/** Downloads one entry (or confirms it is present). */
async function ensureFile(
  entry: LockEntry,
  label: string,
  options: DownloadOptions,
  cache: VerifyCache,
  cacheFile: string,
  reached: Set<string>,
): Promise<FileOutcome["status"]> {
  const abs = join(options.root, entry.path);
  const partial = `${abs}.partial`;
  if (entry.url === undefined) {
    // A local file: never downloaded, never deleted; only verified.
    const problem = await localProblem(entry, abs, cache, cacheFile);
    if (problem === undefined) return "present";
    throw new PermanentError(
      `${problem}; it is a local file (no url in models.lock), so it is not downloaded: put it ` +
        "back, or lock what is there with `deno task models add`",
    );
  }
  if (await alreadyPresent(entry, abs, cache, cacheFile)) return "present";
  if (entry.url.startsWith("fixture:")) {
    throw new PermanentError(
      `${entry.url} is built locally (deno task fixtures), it cannot be downloaded`,
    );
  }
  await Deno.mkdir(dirname(abs), { recursive: true });
  const state = await preparePartial(partial, entry);
  const ctx: RunContext = {
    fetch: options.fetch ?? fetch,
    stallTimeoutMs: options.stallTimeoutMs ?? 60_000,
    connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
    signal: options.signal,
    reached,
    proxy: (url) => proxyFor(url, options.env ?? readEnv),
  };
  const maxAttempts = options.maxAttempts ?? 6;
  const delay = options.retryDelayMs ?? ((n: number) => Math.min(30_000, 1000 * 2 ** (n - 1)));
  const progress = options.progress === false
    ? null
    : new ProgressLine(label, entry.size, options.progress);
  progress?.update(state.offset);
  let failures = 0;
  try {
    if (entry.size === 0) await Deno.writeFile(partial, new Uint8Array(0));
    while (state.offset < entry.size) {
      const before = state.offset;
      try {
        await fetchInto(entry, partial, state, ctx, progress);
        break;
      } catch (e) {
        if (!(e instanceof TransientError)) throw e;
        // The host answered before; a request that now fails to connect is an interruption.
        failures = state.offset > before ? 1 : failures + 1;
        if (failures >= maxAttempts) {
          throw new PermanentError(
            `${e.message}; giving up after ${failures} failed attempts in a row ` +
              `(any partial file is kept; run again to resume)`,
          );
        }
        const wait = delay(failures);
        log("warn", "models", `download interrupted, retrying in ${wait} ms`, {
          path: entry.path,
          error: e.message,
          attempt: failures,
        });
        await abortableDelay(wait, options.signal);
      }
    }
  } finally {
    progress?.finish();
  }
  const actual = state.hash.digest("hex");
  if (actual !== entry.sha256) {
    await removeIfExists(partial);
    throw new PermanentError(
      `sha256 mismatch: expected ${entry.sha256}, got ${actual}; the download was deleted`,
    );
  }
  await Deno.rename(partial, abs);
  await remember(cache, cacheFile, entry, abs);
  return "downloaded";
}

/** What is wrong with a local file (undefined: present and verified). */
async function localProblem(
  entry: LockEntry,
  abs: string,
  cache: VerifyCache,
  cacheFile: string,
): Promise<string | undefined> {
  const stat = await statOrNull(abs);
  if (!stat) return `missing; expected at ${abs}`;
  if (!stat.isFile) return `${abs} is not a regular file`;
  if (stat.size !== entry.size) return `size is ${stat.size} bytes, expected ${entry.size}`;
  const mtimeMs = stat.mtime?.getTime() ?? null;
  let actual = cachedSha256(cache, entry.path, stat.size, mtimeMs);
  if (actual === undefined) {
    actual = await sha256File(abs);
    if (mtimeMs !== null) {
      cache.files[entry.path] = { size: stat.size, mtimeMs, sha256: actual };
      await saveVerifyCache(cacheFile, cache);
    }
  }
  return actual === entry.sha256 ? undefined : `sha256 is ${actual}, expected ${entry.sha256}`;
}

/**
 * Makes every entry present and verified under `root`, one file at a time.
 * Never throws for a single file's failure (see `report.failed`); rethrows
 * an abort of `options.signal`, and {@link HostUnreachableError} when the
 * first request to a host cannot connect (the rest of the run would fail
 * the same way).
 */
export async function downloadModelFiles(options: DownloadOptions): Promise<DownloadReport> {
  const cacheFile = options.cacheFile ?? join(options.root, ".verified.json");
  const cache = await loadVerifyCache(cacheFile);
  const reached = new Set<string>();
  const files: FileOutcome[] = [];
  const count = options.entries.length;
  for (const [i, entry] of options.entries.entries()) {
    const label = `[${i + 1}/${count}] ${entry.path}`;
    try {
      const status = await ensureFile(entry, label, options, cache, cacheFile, reached);
      files.push({ path: entry.path, status });
      log("info", "models", status === "present" ? "already present" : "downloaded and verified", {
        path: entry.path,
      });
    } catch (e) {
      if (options.signal?.aborted) throw options.signal.reason;
      if (e instanceof HostUnreachableError) throw e;
      const error = (e as Error).message;
      files.push({ path: entry.path, status: "failed", error });
      log("error", "models", "download failed", { path: entry.path, error });
    }
  }
  return { files, failed: files.filter((f) => f.status === "failed") };
}

/**
 * Start-up check of the model files against models.lock: cheap on every
 * start (size + the sha256 recorded for the file's size and mtime), full
 * sha256 only for files that are new or changed since they were last hashed.
 *
 * @module
 */

import { join } from "node:path";
import type { LockEntry } from "./lock.ts";
import { sha256File } from "../bytes/mod.ts";
import { cachedSha256, loadVerifyCache, saveVerifyCache } from "./verify_cache.ts";
import { log } from "../log/mod.ts";
import { ProgressLine, type ProgressOptions } from "./progress.ts";

/** What to check. */
export interface VerifyOptions {
  /** The models root; entry paths are relative to it. */
  root: string;
  /** The lock entries to check. */
  entries: readonly LockEntry[];
  /** Cache file; default `<root>/.verified.json`. */
  cacheFile?: string;
  /** Full-hash function (tests count calls); default streaming sha256. */
  hashFile?: (absolutePath: string, onBytes?: (done: number) => void) => Promise<string>;
  /** A progress line on stderr while a file is hashed; default none (a log line per file). */
  progress?: ProgressOptions | false;
}

/** One file problem. */
export interface VerifyProblem {
  /** The lock path (relative to the root). */
  path: string;
  /** What is wrong. */
  kind: "missing" | "not_a_file" | "size" | "sha256" | "unreadable";
  /** Human-readable: `<path>: <what is wrong>`. */
  message: string;
}

/** Outcome of a check. */
export interface VerifyResult {
  /** Everything found wrong (empty = all good). */
  problems: VerifyProblem[];
  /** Paths that needed a full sha256 this time. */
  hashed: string[];
  /** Paths accepted from the cache without hashing. */
  cached: string[];
}

/** Thrown by {@link verifyModelFiles}; the message lists every problem. */
export class ModelFilesError extends Error {
  /** The individual problems. */
  readonly problems: VerifyProblem[];
  /**
   * Creates the error with a message ending in the fix to run, or with
   * `message` when the caller wrote one (per-file advice).
   */
  constructor(root: string, problems: VerifyProblem[], message?: string) {
    super(
      message ??
        `model files under ${root} are missing or wrong:\n` +
          problems.map((p) => `  ${p.message}`).join("\n") +
          "\nrun `deno task models`",
    );
    this.name = "ModelFilesError";
    this.problems = problems;
  }
}

/** Formats a byte count with thousands separators (sizes in messages). */
function bytes(n: number): string {
  return `${n.toLocaleString("en-US")} bytes`;
}

/**
 * Checks every entry and returns what is wrong, without throwing. Files that
 * are hashed get their result recorded in the cache.
 */
export async function checkModelFiles(options: VerifyOptions): Promise<VerifyResult> {
  const cacheFile = options.cacheFile ?? join(options.root, ".verified.json");
  const hashFile = options.hashFile ?? sha256File;
  const cache = await loadVerifyCache(cacheFile);
  const result: VerifyResult = { problems: [], hashed: [], cached: [] };
  let dirty = false;
  for (const entry of options.entries) {
    const abs = join(options.root, entry.path);
    const problem = (kind: VerifyProblem["kind"], what: string) =>
      result.problems.push({ path: entry.path, kind, message: `${entry.path}: ${what}` });
    let stat: Deno.FileInfo;
    try {
      stat = await Deno.stat(abs);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) problem("missing", "missing");
      else problem("unreadable", `cannot stat: ${(e as Error).message}`);
      continue;
    }
    if (!stat.isFile) {
      problem("not_a_file", "is not a regular file");
      continue;
    }
    if (stat.size !== entry.size) {
      problem("size", `size is ${bytes(stat.size)}, expected ${bytes(entry.size)}`);
      continue;
    }
    const mtimeMs = stat.mtime?.getTime() ?? null;
    let actual = cachedSha256(cache, entry.path, stat.size, mtimeMs);
    if (actual !== undefined) {
      result.cached.push(entry.path);
    } else {
      const line = options.progress === undefined || options.progress === false
        ? null
        : new ProgressLine(`hashing ${entry.path}`, stat.size, options.progress);
      // One line per file: the progress line when there is one, else the log line.
      if (line === null) {
        log("info", "models", "hashing model file (first start or file changed)", {
          path: entry.path,
          size: stat.size,
        });
      }
      try {
        actual = await hashFile(abs, line ? (n) => line.update(n) : undefined);
      } catch (e) {
        problem("unreadable", `cannot read: ${(e as Error).message}`);
        continue;
      } finally {
        line?.finish();
      }
      result.hashed.push(entry.path);
      if (mtimeMs !== null) {
        cache.files[entry.path] = { size: stat.size, mtimeMs, sha256: actual };
        dirty = true;
      }
    }
    if (actual !== entry.sha256) {
      problem("sha256", `sha256 is ${actual}, expected ${entry.sha256}`);
    }
  }
  if (dirty) await saveVerifyCache(cacheFile, cache);
  return result;
}

/**
 * Verifies the model files and throws {@link ModelFilesError} when any is
 * missing or wrong; the message names each file and ends with
 * "run `deno task models`".
 */
export async function verifyModelFiles(options: VerifyOptions): Promise<VerifyResult> {
  const result = await checkModelFiles(options);
  if (result.problems.length > 0) throw new ModelFilesError(options.root, result.problems);
  return result;
}

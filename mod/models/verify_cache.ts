/**
 * The verification cache (`<root>/.verified.json`): for each verified path,
 * the size and mtime it had when it was fully hashed, and the sha256 that
 * hash produced. Start-up compares size + mtime only and re-hashes a file only
 * when either changed, so a 3.4 GB UNet is hashed once, not on every start.
 *
 * @module
 */

import { log } from "../log/mod.ts";

/** What was recorded for one file. */
export interface CacheRecord {
  /** Size in bytes when hashed. */
  size: number;
  /** Modification time (ms since epoch) when hashed. */
  mtimeMs: number;
  /** The content's sha256 (what the file really hashed to, right or wrong). */
  sha256: string;
}

/** The cache file's contents, keyed by models-root-relative path. */
export interface VerifyCache {
  /** Format version; other versions are ignored. */
  version: 1;
  /** Records by path. */
  files: Record<string, CacheRecord>;
}

/** An empty cache. */
export function emptyCache(): VerifyCache {
  return { version: 1, files: {} };
}

function isRecord(v: unknown): v is CacheRecord {
  if (v === null || typeof v !== "object") return false;
  const r = v as Record<string, unknown>;
  return typeof r.size === "number" && typeof r.mtimeMs === "number" &&
    typeof r.sha256 === "string" && /^[0-9a-f]{64}$/.test(r.sha256);
}

/**
 * Loads the cache; a missing, unreadable or malformed file yields an empty
 * cache (the only cost is re-hashing).
 */
export async function loadVerifyCache(path: string): Promise<VerifyCache> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) {
      log("warn", "models", "cannot read the verification cache; files will be re-hashed", {
        path,
        error: (e as Error).message,
      });
    }
    return emptyCache();
  }
  try {
    const doc = JSON.parse(text) as Record<string, unknown>;
    if (doc?.version !== 1 || doc.files === null || typeof doc.files !== "object") {
      return emptyCache();
    }
    const files: Record<string, CacheRecord> = {};
    for (const [k, v] of Object.entries(doc.files as Record<string, unknown>)) {
      if (isRecord(v)) files[k] = { size: v.size, mtimeMs: v.mtimeMs, sha256: v.sha256 };
    }
    return { version: 1, files };
  } catch {
    log("warn", "models", "verification cache is not valid JSON; files will be re-hashed", {
      path,
    });
    return emptyCache();
  }
}

/**
 * Writes the cache atomically (temp file + rename). Failure (read-only
 * models folder) is logged, not thrown: the cache is an optimisation.
 */
export async function saveVerifyCache(path: string, cache: VerifyCache): Promise<void> {
  const tmp = `${path}.${crypto.randomUUID()}.tmp`;
  try {
    await Deno.writeTextFile(tmp, JSON.stringify(cache, null, 2) + "\n");
    await Deno.rename(tmp, path);
  } catch (e) {
    log("warn", "models", "cannot write the verification cache", {
      path,
      error: (e as Error).message,
    });
    try {
      await Deno.remove(tmp);
    } catch {
      // nothing was written
    }
  }
}

/**
 * Returns the recorded sha256 when the record still matches the file's
 * current size and mtime, else undefined (the file must be hashed).
 */
export function cachedSha256(
  cache: VerifyCache,
  path: string,
  size: number,
  mtimeMs: number | null,
): string | undefined {
  if (mtimeMs === null) return undefined;
  const r = cache.files[path];
  return r && r.size === size && r.mtimeMs === mtimeMs ? r.sha256 : undefined;
}

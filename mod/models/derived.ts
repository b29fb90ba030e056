/**
 * Derived model files: files made on this machine from pinned files by a
 * deterministic converter (the fp32 form of the fp16 set, the ONNX TAESD
 * decoder, a UNet with LoRAs merged in), verified like pinned files.
 *
 * A derived folder is keyed by its **recipe**: the converter, its version,
 * the sha256 of every input (themselves verified against `models.lock`) and
 * the converter's parameters (LoRA weights). Next to the files it wrote, the
 * folder holds `.derived.json`: the key, the recipe and each file's size,
 * sha256 (hashed as it was written) and mtime. A folder is in place when the
 * record's key is the recipe's and every file has its recorded size and hash
 * — the hash is taken again only when a file's size or mtime changed, as for
 * pinned files (`verify_cache.ts`), so a check costs a few `stat`s. Anything
 * else (no record, another key, a missing, truncated or changed file) is
 * stale, and {@link ensureDerived} builds the folder again: into a scratch
 * folder beside it (same file system), recorded, then moved into place, so an
 * interrupted build never leaves a folder that looks complete. Scratch folders
 * of processes that died are swept at the next build; a build abandoned by a
 * shutdown during start-up has its scratch folder removed before the process
 * exits (`unfinished.ts`).
 *
 * One mechanism for every derived file: `models.lock` `[[derived]]` folders
 * (`required.ts` finds them, `check.ts` reports them, start-up and
 * `deno task models` build them) and the merged-LoRA cache (`merged.ts`).
 * It lives here, beside the lock and the pinned-file check it extends.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { basename, dirname, join } from "node:path";
import type { WrittenFile } from "../convert/mod.ts";
import { log } from "../log/mod.ts";
import { processAlive } from "../lora/mod.ts";
import { sha256File } from "../bytes/mod.ts";
import { buildDone, buildStarted, untilAborted } from "./unfinished.ts";

/** The record's file name inside a derived folder. */
export const DERIVED_RECORD = ".derived.json";

/** What a derived folder is made from. */
export interface DerivedRecipe {
  /** Converter name (`mod/convert` `CONVERTERS`, or `lora-merge`). */
  converter: string;
  /** The converter's version. */
  version: number;
  /** Each input, by lock path (or another derived folder's file), with its verified sha256. */
  inputs: ReadonlyArray<{ path: string; sha256: string }>;
  /** Converter parameters (plain JSON). */
  params?: Record<string, unknown>;
}

/** One file of a derived folder as recorded. */
export interface RecordedFile extends WrittenFile {
  /** Modification time (ms since epoch) when recorded. */
  mtimeMs: number;
}

/** The `.derived.json` of a folder. */
export interface DerivedRecord {
  /** Format version. */
  version: 1;
  /** {@link recipeKey} of `recipe`. */
  key: string;
  /** What it was made from. */
  recipe: DerivedRecipe;
  /** Every file written. */
  files: RecordedFile[];
  /** When it was built (ISO 8601). */
  builtAt: string;
  /** What the converter reported (plain JSON), e.g. which LoRA modules matched. */
  info?: unknown;
}

/** Why a folder is not in place. */
export type DerivedProblem =
  | "not built"
  | "stale"
  | "wrong size"
  | "wrong hash"
  | "unreadable";

/** The state of a derived folder. */
export type DerivedCheck =
  | { ok: true; record: DerivedRecord; hashed: string[] }
  | { ok: false; problem: DerivedProblem; detail: string };

/** The canonical JSON of a value (object keys sorted), so equal recipes give equal keys. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** The key of a recipe: sha256 of its canonical JSON (64 lowercase hex). */
export function recipeKey(recipe: DerivedRecipe): string {
  return createHash("sha256").update(canonical(recipe)).digest("hex");
}

/** Reads a folder's record; undefined when there is none or it is not one. */
export async function readDerivedRecord(dir: string): Promise<DerivedRecord | undefined> {
  let text: string;
  try {
    text = await Deno.readTextFile(join(dir, DERIVED_RECORD));
  } catch {
    return undefined;
  }
  try {
    const r = JSON.parse(text) as DerivedRecord;
    const fileOk = (f: RecordedFile) =>
      typeof f?.name === "string" && Number.isSafeInteger(f.size) &&
      /^[0-9a-f]{64}$/.test(f.sha256 ?? "") && typeof f.mtimeMs === "number";
    if (r?.version !== 1 || typeof r.key !== "string" || !Array.isArray(r.files)) return undefined;
    return r.files.every(fileOk) ? r : undefined;
  } catch {
    return undefined;
  }
}

async function writeRecord(dir: string, record: DerivedRecord): Promise<void> {
  const tmp = join(dir, `${DERIVED_RECORD}.${crypto.randomUUID()}.tmp`);
  await Deno.writeTextFile(tmp, JSON.stringify(record, null, 2) + "\n");
  await Deno.rename(tmp, join(dir, DERIVED_RECORD));
}

/** Options of {@link checkDerived} and {@link ensureDerived}. */
export interface DerivedOptions {
  /** The file names the folder must hold (a lock's declared outputs); default: the record's. */
  names?: readonly string[];
  /** Full-hash function (tests count calls); default streaming sha256. */
  hashFile?: (path: string) => Promise<string>;
  /**
   * {@link ensureDerived}: stop waiting for the build when this aborts (a
   * shutdown during start-up): the scratch folder is removed and the
   * signal's reason thrown; the build itself is abandoned (`unfinished.ts`).
   */
  signal?: AbortSignal;
}

/**
 * Whether the folder `dir` holds what `recipe` makes: its record has the
 * recipe's key and every recorded file has its size, and its sha256 when its
 * mtime changed (a file that hashes right again gets its new mtime recorded).
 */
export async function checkDerived(
  dir: string,
  recipe: DerivedRecipe,
  options: DerivedOptions = {},
): Promise<DerivedCheck> {
  const record = await readDerivedRecord(dir);
  if (!record) return { ok: false, problem: "not built", detail: `no ${DERIVED_RECORD} in ${dir}` };
  if (record.key !== recipeKey(recipe)) {
    return {
      ok: false,
      problem: "stale",
      detail: `made from other inputs or by another converter version (${
        describeChange(record.recipe, recipe)
      })`,
    };
  }
  const names = options.names ?? record.files.map((f) => f.name);
  const byName = new Map(record.files.map((f) => [f.name, f]));
  const hashFile = options.hashFile ?? sha256File;
  const hashed: string[] = [];
  let touched = false;
  for (const name of names) {
    const f = byName.get(name);
    if (!f) return { ok: false, problem: "stale", detail: `${name} was not written by that build` };
    const path = join(dir, name);
    let stat: Deno.FileInfo;
    try {
      stat = await Deno.stat(path);
    } catch (e) {
      return e instanceof Deno.errors.NotFound
        ? { ok: false, problem: "not built", detail: `${name} is missing` }
        : { ok: false, problem: "unreadable", detail: `${name}: ${(e as Error).message}` };
    }
    if (stat.size !== f.size) {
      return {
        ok: false,
        problem: "wrong size",
        detail: `${name} is ${stat.size.toLocaleString("en-US")} bytes, the build wrote ` +
          `${f.size.toLocaleString("en-US")}`,
      };
    }
    const mtimeMs = stat.mtime?.getTime() ?? null;
    if (mtimeMs !== null && mtimeMs === f.mtimeMs) continue;
    let actual: string;
    try {
      actual = await hashFile(path);
    } catch (e) {
      return { ok: false, problem: "unreadable", detail: `${name}: ${(e as Error).message}` };
    }
    hashed.push(name);
    if (actual !== f.sha256) {
      return {
        ok: false,
        problem: "wrong hash",
        detail:
          `${name} changed since it was built (sha256 ${actual}, the build wrote ${f.sha256})`,
      };
    }
    if (mtimeMs !== null) {
      f.mtimeMs = mtimeMs;
      touched = true;
    }
  }
  if (touched) await writeRecord(dir, record).catch(() => {});
  return { ok: true, record, hashed };
}

function describeChange(was: DerivedRecipe | undefined, now: DerivedRecipe): string {
  if (!was) return "unknown recipe";
  if (was.converter !== now.converter) return `converter ${was.converter} → ${now.converter}`;
  if (was.version !== now.version) return `${now.converter} v${was.version} → v${now.version}`;
  const old = new Map((was.inputs ?? []).map((i) => [i.path, i.sha256]));
  const changed = now.inputs.filter((i) => old.get(i.path) !== i.sha256).map((i) => i.path);
  if (changed.length > 0) return `input ${changed.join(", ")} changed`;
  return "parameters changed";
}

/** Prefix of scratch folders: `<folder>.building-<pid>-<random>`. */
const BUILDING = ".building-";

/**
 * Removes scratch folders beside `dir` left by processes that no longer run
 * (a build interrupted by a crash or a kill).
 */
async function sweepScratch(dir: string): Promise<void> {
  const parent = dirname(dir);
  const prefix = `${basename(dir)}${BUILDING}`;
  try {
    for await (const e of Deno.readDir(parent)) {
      if (!e.isDirectory || !e.name.startsWith(prefix)) continue;
      const pid = Number(e.name.slice(prefix.length).split("-")[0]);
      if (pid !== Deno.pid && !(await processAlive(pid))) {
        await Deno.remove(join(parent, e.name), { recursive: true }).catch(() => {});
        log("info", "models", "removed an interrupted build", { folder: join(parent, e.name) });
      }
    }
  } catch {
    // no parent yet: nothing to sweep
  }
}

/** What {@link ensureDerived} did. */
export interface EnsureResult {
  /** The folder's record (now in place). */
  record: DerivedRecord;
  /** Why it was built; undefined when it was in place already. */
  built?: string;
}

/**
 * Makes sure `dir` holds what `recipe` makes: reuses it when
 * {@link checkDerived} finds it in place, else runs `build` into a scratch
 * folder beside it, hashes what it wrote when `build` did not report it,
 * records it, and moves it into place (replacing the stale folder).
 *
 * @param build writes the files into the (empty) folder it is given; returns
 *   them, with sizes and sha256 when it hashed them while writing, and may add
 *   `info` to keep in the record
 * @throws the build's error (the scratch folder is removed), or an Error when
 *   it wrote other files than `options.names`
 */
export async function ensureDerived(
  dir: string,
  recipe: DerivedRecipe,
  build: (
    into: string,
  ) => Promise<{ files: ReadonlyArray<Partial<WrittenFile> & { name: string }>; info?: unknown }>,
  options: DerivedOptions = {},
): Promise<EnsureResult> {
  const check = await checkDerived(dir, recipe, options);
  if (check.ok) return { record: check.record };
  await Deno.mkdir(dirname(dir), { recursive: true });
  await sweepScratch(dir);
  const { signal } = options;
  signal?.throwIfAborted();
  const scratch = join(
    dirname(dir),
    `${basename(dir)}${BUILDING}${Deno.pid}-${
      crypto.randomUUID().replaceAll("-", "").slice(0, 16)
    }`,
  );
  // Known before it exists and made synchronously: a stop at any moment either finds it
  // registered (and removes it before the process exits) or finds nothing to remove.
  buildStarted(scratch);
  try {
    Deno.mkdirSync(scratch, { mode: 0o700 });
  } catch (e) {
    buildDone(scratch);
    throw e;
  }
  try {
    const started = performance.now();
    const out = await untilAborted(build(scratch), signal);
    const hashFile = options.hashFile ?? sha256File;
    const files: RecordedFile[] = [];
    for (const f of out.files) {
      const path = join(scratch, f.name);
      const stat = await Deno.stat(path);
      const sha256 = f.sha256 !== undefined && f.size === stat.size
        ? f.sha256
        : await hashFile(path);
      files.push({ name: f.name, size: stat.size, sha256, mtimeMs: stat.mtime?.getTime() ?? 0 });
    }
    if (options.names) {
      const wrote = files.map((f) => f.name).sort();
      const want = [...options.names].sort();
      if (wrote.join("\n") !== want.join("\n")) {
        throw new Error(
          `${dir}: ${recipe.converter} wrote ${JSON.stringify(wrote)}, the lock declares ${
            JSON.stringify(want)
          }`,
        );
      }
    }
    const record: DerivedRecord = {
      version: 1,
      key: recipeKey(recipe),
      recipe,
      files,
      builtAt: new Date().toISOString(),
      ...(out.info !== undefined ? { info: out.info } : {}),
    };
    await writeRecord(scratch, record);
    signal?.throwIfAborted();
    await Deno.remove(dir, { recursive: true }).catch((e) => {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    });
    await Deno.rename(scratch, dir);
    buildDone(scratch);
    log("info", "models", "built derived model files", {
      folder: dir,
      converter: recipe.converter,
      reason: `${check.problem}: ${check.detail}`,
      files: files.map((f) => f.name),
      bytes: files.reduce((n, f) => n + f.size, 0),
      ms: Math.round(performance.now() - started),
    });
    return { record, built: `${check.problem}: ${check.detail}` };
  } catch (e) {
    await Deno.remove(scratch, { recursive: true }).catch(() => {});
    // An abandoned build may still write into it: it is removed again before the process exits.
    if (!signal?.aborted) buildDone(scratch);
    throw e;
  }
}

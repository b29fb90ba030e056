/**
 * Warm starts: ONNX Runtime's optimised graph of each model kept on disk.
 * Opening a model at the "all" level spends most of its time in graph
 * optimisation (constant folding, fusions, the CPU's NCHWc layout); the
 * graph never changes between starts, so the first start asks ONNX Runtime
 * to write what it optimised (its `optimizedModelFilePath`, the weights in an
 * external data file beside it, and the weights its CPU kernels pre-pack) and
 * later starts open that file with optimisation disabled, as ONNX Runtime's
 * documentation describes its offline mode (onnxruntime.ai, "Graph
 * Optimizations in ONNX Runtime": "Offline mode … the optimized model can be
 * loaded … with optimizations disabled").
 *
 * Every cached graph sits in its own folder, `<cache>/<label>-<path id>-<key>/`,
 * keyed by everything that changes it: the model's files (name, size, sha256
 * of the `.onnx` and each external data file it names), the ONNX Runtime
 * version, the execution provider, the optimisation level, whether pre-packed
 * weights are saved, and the CPU (vendor, family, model and feature flags of
 * `/proc/cpuinfo`): an "all"-level graph holds layout transformations and
 * pre-packed weights for this CPU's kernels, and ONNX Runtime warns that it
 * "should only be used in the same environment the model was optimized in".
 * Thread counts do not change the graph and are not in the key. The sha256
 * of a source file is hashed once and remembered by its size, mtime and
 * inode (`sources.json`, the rule of the model verification cache).
 *
 * A folder is written as `<folder>.building-<pid>-<random>`, its files
 * flushed to disk (fsync), its record last, then renamed into place: a crash
 * leaves a scratch folder (swept once its process is gone), never a half
 * cached graph. A later start checks the record (the key, each file's size
 * and mtime); anything stale or any failure to open the cached graph is
 * logged and the model is optimised afresh; a cache that cannot be written
 * (read-only models folder, full disk) is logged and the model opens as
 * before. Folders are swept like the merged-LoRA cache: per model, the
 * current one and the most recently used other one stay, and a folder whose
 * model file is gone goes.
 *
 * Pre-packed weights are kept only where a later start can read them.
 * ONNX Runtime (1.30) pads its data file to a 4096-byte boundary only before
 * a buffer of more than 1 MiB (`align_threshold` and
 * `on_disk_alignment_factor` of `ModelSavingOptions`, onnxruntime
 * `include/onnxruntime/core/graph/model_saving_options.h`; the padding in
 * `AddPrepackedEntriesToProto`,
 * `onnxruntime/core/framework/tensor_external_data_info.cc`), and a later
 * start uses each pre-packed buffer in place in the mapped file, where the
 * CPU's SGEMM kernel reads packed weights with aligned loads (AVX-512
 * `vmovaps`) that need the 64 bytes of MLAS's
 * `MLAS_DEFAULT_PREFERRED_BUFFER_ALIGNMENT`
 * (`onnxruntime/core/mlas/lib/mlasi.h`). A smaller buffer written after an
 * initializer whose size is not a multiple of 64 bytes lands off that
 * boundary, and the first run of the reopened graph dies with SIGSEGV: a
 * converted CLIP text encoder narrower than 768 (its 77×77 float causal mask
 * is 23,716 bytes; its projections, under 1 MiB each, follow it) did, under
 * `gdb` at a `vmovaps` from an address 804 bytes into a page, the offset of
 * its first projection's pre-packed buffer in the data file modulo 4096. So
 * the cache reads the offsets of every written graph's pre-packed buffers
 * ({@link misplacedPrepacked}); when one is off a 64-byte boundary, the
 * model is optimised again and its graph written without pre-packed weights
 * (its kernels pack them at each start, in memory they allocate aligned),
 * and the record says why (`withoutPrepacked`).
 *
 * @module
 */

import { createHash } from "node:crypto";
import { join } from "node:path";
import { log } from "../log/mod.ts";
import { sha256File } from "../bytes/mod.ts";
import { readModelInfo } from "./model_info.ts";
import type { ExternalDataFile, SessionOptions } from "./session_options.ts";
import { processExists, readSystemText } from "./system_files.ts";

/** Version of the cache layout and key; a change makes every cached graph stale. */
export const OPTIMIZED_CACHE_VERSION = 2;

/**
 * The boundary every pre-packed weight buffer of a cached graph must start
 * on: MLAS's `MLAS_DEFAULT_PREFERRED_BUFFER_ALIGNMENT`, 64 bytes (onnxruntime
 * `onnxruntime/core/mlas/lib/mlasi.h`). Version 1 of the cache kept graphs
 * whose buffers were off it (see the module's notes); version 2 checks.
 */
export const PREPACKED_ALIGNMENT = 64;

/** The record of a cached graph, written last. */
export const OPTIMIZED_RECORD = "optimized.json";
/** The cached graph. */
export const OPTIMIZED_MODEL = "model.onnx";
/** Its weights (and pre-packed weights). */
export const OPTIMIZED_DATA = "model.onnx.data";
/** Marks a folder being written: `<folder>.building-<pid>-<random>`. */
const BUILDING = ".building-";
/** Remembered source hashes. */
const SOURCES = "sources.json";

/**
 * What the cache needs of the runtime (runtime.ts passes it in: no import
 * cycle). `S` is the runtime's session, which the cache only hands back.
 */
export interface CacheRuntime<S> {
  /** Opens a model file as `createSession` does without a cache. */
  open(path: string, options: SessionOptions): Promise<S>;
  /** Opens a model from bytes as `createSessionFromBytes` does without a cache. */
  openBytes(
    bytes: Uint8Array,
    externalData: readonly ExternalDataFile[],
    options: SessionOptions,
  ): Promise<S>;
  /** Frees a session the cache opened and does not hand back. */
  release(session: S): Promise<void>;
  /** The ONNX Runtime build, for the key. */
  version: string;
}

/**
 * The model to open: a file (its `.onnx` and the external data it names are
 * hashed, once per change), or bytes rewritten in memory with the file they
 * were read from (`from`: names the cache's folder and lets the sweep see
 * when it is gone). Rewritten bytes are keyed by themselves (hashed at every
 * start), or, with `rewrite` (the name and version of a rewrite that depends
 * on nothing but the file), by the file's remembered hash and that name:
 * then a later start can find the graph with {@link openCachedRewrite}
 * before reading or rewriting anything.
 */
export type CacheSource =
  | { path: string }
  | {
    bytes: Uint8Array;
    externalData: readonly ExternalDataFile[];
    from: string;
    rewrite?: string;
  };

/** Everything that changes an optimised graph. */
export interface OptimizedKey {
  /** {@link OPTIMIZED_CACHE_VERSION}. */
  format: number;
  /** ONNX Runtime's version. */
  runtime: string;
  /** The execution provider. */
  provider: string;
  /** The optimisation level the graph was optimised at. */
  graphOptimization: string;
  /**
   * Whether the CPU kernels' pre-packed weights are asked to be saved with
   * it (a graph whose buffers ONNX Runtime writes off their boundary is kept
   * without them; its record says so).
   */
  prepacked: boolean;
  /** sha256 of the CPU's identity (see {@link cpuIdentity}). */
  cpu: string;
  /** The model's files, the `.onnx` first. */
  sources: Array<{ name: string; size: number; sha256: string }>;
}

/** The record of one cached graph. */
export interface OptimizedRecord {
  /** The key it was built for. */
  key: OptimizedKey;
  /** The model it was optimised from (real path). */
  source: string;
  /** The files written, as they were when recorded. */
  files: Array<{ name: string; size: number; mtimeMs: number }>;
  /** When it was written. */
  builtAt: string;
  /** Milliseconds the optimising open took. */
  buildMs: number;
  /**
   * Why the pre-packed weights the key asks for were left out of the data
   * file ({@link misplacedPrepacked}); absent when they are in it.
   */
  withoutPrepacked?: string;
}

/** What happened when a model was opened through the cache. */
export type CacheOutcome =
  | { state: "hit"; folder: string; ms: number }
  | { state: "built"; folder: string; ms: number; bytes: number; prepacked: boolean }
  | { state: "bypassed"; why: string };

/**
 * The CPU as the key knows it: architecture, vendor, family, model and
 * feature flags of the first processor in `/proc/cpuinfo` (x86 "flags", Arm
 * "Features"); null where they cannot be read, and then nothing is cached
 * (a graph optimised for an unknown CPU cannot be trusted on the next).
 */
export function cpuIdentity(cpuinfo: string | null, arch: string = Deno.build.arch): string | null {
  if (cpuinfo === null) return null;
  const first = cpuinfo.split(/\n\s*\n/)[0];
  const field = (name: string) =>
    new RegExp(`^${name}\\s*:\\s*(.*)$`, "m").exec(first)?.[1].trim() ?? "";
  const flags = field("flags") || field("Features");
  if (!flags) return null;
  const parts = [
    arch,
    field("vendor_id") || field("CPU implementer"),
    field("cpu family") || field("CPU architecture"),
    field("model") || field("CPU part"),
    flags.split(/\s+/).sort().join(" "),
  ];
  return createHash("sha256").update(parts.join("\n")).digest("hex");
}

let cpu: string | null | undefined;

/** Cache folders this process has already warned about. */
const warned = new Set<string>();

function processCpu(): string | null {
  return cpu === undefined ? (cpu = cpuIdentity(readSystemText("/proc/cpuinfo"))) : cpu;
}

/**
 * Opens `path` through the cache folder `options.optimizedCache`: the cached
 * graph when one is in place for the current key, else the model itself,
 * optimised and written to the cache on the way. Never fails because of the
 * cache: any problem with it is logged and the model opens as it would
 * without one.
 */
export async function openThroughCache<S>(
  model: CacheSource,
  options: SessionOptions,
  runtime: CacheRuntime<S>,
  onOutcome?: (outcome: CacheOutcome) => void,
): Promise<S> {
  const dir = options.optimizedCache!;
  const plain: SessionOptions = { ...options, optimizedCache: undefined, saveOptimized: undefined };
  const label = options.label ?? "model";
  const openSource = (o: SessionOptions) =>
    "path" in model
      ? runtime.open(model.path, o)
      : runtime.openBytes(model.bytes, model.externalData, o);
  const bypass = async (why: string) => {
    onOutcome?.({ state: "bypassed", why });
    return await openSource(plain);
  };
  const base = keyBase(options, runtime);
  if (typeof base === "string") return await bypass(base);

  let plan: Plan;
  try {
    plan = await planFor(model, dir, label, base);
  } catch (e) {
    // Once per folder and process: every model of a start would say the same.
    if (!warned.has(dir)) {
      warned.add(dir);
      log("warn", "onnx", "the optimised-graph cache cannot be used; optimising at this start", {
        model: "path" in model ? model.path : model.from,
        cache: dir,
        error: errorText(e),
      });
    }
    return await bypass(errorText(e));
  }

  const hit = await openHit(plan, plain, runtime, onOutcome);
  return hit ?? await build(openSource, runtime, plan, plain, onOutcome);
}

/**
 * Opens the cached graph of a file rewritten by `rewrite` (see
 * {@link CacheSource}) without the rewritten bytes: null when the cache is
 * off for these options, nothing is cached for the file and rewrite, or what
 * is cached is stale or does not open (then the caller rewrites the file and
 * opens the bytes with the same `rewrite`, which caches them afresh). Never
 * fails because of the cache.
 */
export async function openCachedRewrite<S>(
  model: { from: string; rewrite: string },
  options: SessionOptions,
  runtime: CacheRuntime<S>,
  onOutcome?: (outcome: CacheOutcome) => void,
): Promise<S | null> {
  const dir = options.optimizedCache;
  const base = keyBase(options, runtime);
  if (dir === undefined || typeof base === "string") return null;
  const plain: SessionOptions = { ...options, optimizedCache: undefined, saveOptimized: undefined };
  let plan: Plan;
  try {
    plan = await planFor(model, dir, options.label ?? "model", base);
  } catch {
    // openThroughCache says why when the bytes are opened.
    return null;
  }
  return await openHit(plan, plain, runtime, onOutcome);
}

/**
 * The key's parts that do not depend on the model, or why nothing is cached
 * for these options.
 */
function keyBase(options: SessionOptions, runtime: { version: string }): OptimizedKey | string {
  const graphOptimization = options.graphOptimization ?? "all";
  if (graphOptimization === "disabled") return "graph optimisation is disabled";
  const provider = options.executionProvider ?? "cpu";
  // GPU providers' graphs are partitioned for their device at load: not measured, not cached.
  if (provider !== "cpu") return `the cache covers the CPU provider, not ${provider}`;
  const cpu = processCpu();
  if (cpu === null) return "the CPU's features cannot be read";
  return {
    format: OPTIMIZED_CACHE_VERSION,
    runtime: runtime.version,
    provider,
    graphOptimization,
    prepacked: true,
    cpu,
    sources: [],
  };
}

/**
 * The plan's cached graph, opened unoptimised, when its folder is complete
 * and current; else null, with a stale or unopenable folder removed.
 */
async function openHit<S>(
  plan: Plan,
  plain: SessionOptions,
  runtime: CacheRuntime<S>,
  onOutcome?: (outcome: CacheOutcome) => void,
): Promise<S | null> {
  const label = plain.label ?? "model";
  const check = await checkFolder(plan);
  if (check.ok) {
    const t0 = performance.now();
    try {
      const session = await runtime.open(join(plan.folder, OPTIMIZED_MODEL), {
        ...plain,
        // The graph is optimised already: nothing to redo.
        graphOptimization: "disabled",
      });
      const ms = Math.round(performance.now() - t0);
      log("info", "onnx", `${label}: opened its optimised graph from the cache`, {
        folder: plan.folder,
        ms,
      });
      onOutcome?.({ state: "hit", folder: plan.folder, ms });
      await touch(join(plan.folder, OPTIMIZED_RECORD));
      await sweep(plan.dir, plan).catch(() => {});
      return session;
    } catch (e) {
      log("warn", "onnx", `${label}: the cached optimised graph does not open; optimising afresh`, {
        folder: plan.folder,
        error: errorText(e),
      });
      await removeFolder(plan.folder);
    }
  } else if (check.problem !== "absent") {
    log("info", "onnx", `${label}: the cached optimised graph is stale; optimising afresh`, {
      folder: plan.folder,
      why: check.problem,
    });
    await removeFolder(plan.folder);
  }
  return null;
}

/** Where a model's graph is cached and under which key. */
interface Plan {
  /** The cache folder. */
  dir: string;
  /** `<label>-<path id>`: the folders of one model. */
  slot: string;
  /** `<slot>-<key digest>`. */
  folder: string;
  /** The key in full. */
  key: OptimizedKey;
  /** The model's real path. */
  source: string;
}

async function planFor(
  model: CacheSource | { from: string; rewrite: string },
  dir: string,
  label: string,
  key: OptimizedKey,
): Promise<Plan> {
  const source = await Deno.realPath("path" in model ? model.path : model.from);
  await Deno.mkdir(dir, { recursive: true });
  if ("bytes" in model && model.rewrite === undefined) {
    // Rewritten in memory: the bytes themselves are the key (a rewrite of another version of
    // the file, or by another version of the rewrite, is other bytes).
    key.sources.push({ name: "(bytes)", size: model.bytes.length, sha256: digest(model.bytes) });
    for (const f of model.externalData) {
      key.sources.push({ name: f.path, size: f.data.length, sha256: digest(f.data) });
    }
    return planned(dir, label, key, source);
  }
  const folderOfModel = source.slice(0, source.lastIndexOf("/") + 1);
  const names = [
    source.slice(folderOfModel.length),
    ...(await readModelInfo(source)).externalData.map((e) => e.location),
  ];
  const memo = await loadSources(dir);
  let changed = false;
  for (const name of names) {
    const file = join(folderOfModel, name);
    const stat = await Deno.stat(file);
    const id = { size: stat.size, mtimeMs: stat.mtime?.getTime() ?? 0, ino: stat.ino ?? 0 };
    let known = memo[file];
    if (!known || known.size !== id.size || known.mtimeMs !== id.mtimeMs || known.ino !== id.ino) {
      const t0 = performance.now();
      known = { ...id, sha256: await sha256File(file) };
      memo[file] = known;
      changed = true;
      log("info", "onnx", "hashed a model file for the optimised-graph cache", {
        file,
        size: id.size,
        ms: Math.round(performance.now() - t0),
      });
    }
    key.sources.push({ name, size: known.size, sha256: known.sha256 });
  }
  if (changed) await saveSources(dir, memo);
  // A rewrite of the file: the same file and the same rewrite make the same bytes.
  if ("rewrite" in model) {
    key.sources.push({ name: `(rewritten: ${model.rewrite})`, size: 0, sha256: "" });
  }
  return planned(dir, label, key, source);
}

function planned(dir: string, label: string, key: OptimizedKey, source: string): Plan {
  const slot = `${label.replace(/[^A-Za-z0-9_]/g, "_")}-${digest(source).slice(0, 8)}`;
  return { dir, slot, folder: join(dir, `${slot}-${digest(key).slice(0, 16)}`), key, source };
}

/** Whether the folder holds a complete graph for the plan's key, or why not. */
async function checkFolder(
  plan: Plan,
): Promise<{ ok: true } | { ok: false; problem: string }> {
  const record = await readRecord(plan.folder);
  if (record === undefined) {
    const exists = await Deno.stat(plan.folder).then(() => true, () => false);
    return { ok: false, problem: exists ? "no readable record" : "absent" };
  }
  if (JSON.stringify(record.key) !== JSON.stringify(plan.key)) {
    return { ok: false, problem: "recorded for another key" };
  }
  for (const f of record.files) {
    const stat = await Deno.stat(join(plan.folder, f.name)).catch(() => null);
    if (!stat) return { ok: false, problem: `${f.name} is missing` };
    if (stat.size !== f.size || (stat.mtime?.getTime() ?? 0) !== f.mtimeMs) {
      return { ok: false, problem: `${f.name} changed since it was written` };
    }
  }
  return { ok: true };
}

async function build<S>(
  openSource: (options: SessionOptions) => Promise<S>,
  runtime: CacheRuntime<S>,
  plan: Plan,
  plain: SessionOptions,
  onOutcome?: (outcome: CacheOutcome) => void,
): Promise<S> {
  const label = plain.label ?? "model";
  await sweep(plan.dir, plan).catch(() => {});
  let scratch: string;
  try {
    scratch = await Deno.makeTempDir({
      dir: plan.dir,
      prefix: `${plan.folder.slice(plan.dir.length + 1)}${BUILDING}${Deno.pid}-`,
    });
  } catch (e) {
    log("warn", "onnx", "the optimised-graph cache cannot be written; optimising at every start", {
      cache: plan.dir,
      error: errorText(e),
    });
    onOutcome?.({ state: "bypassed", why: errorText(e) });
    return await openSource(plain);
  }
  const t0 = performance.now();
  const saving = (prepacked: boolean): SessionOptions => ({
    ...plain,
    saveOptimized: {
      path: join(scratch, OPTIMIZED_MODEL),
      externalData: OPTIMIZED_DATA,
      prepacked,
    },
  });
  let session: S;
  let withoutPrepacked: string | undefined;
  try {
    session = await openSource(saving(plan.key.prepacked));
    const misplaced = plan.key.prepacked
      ? await misplacedPrepacked(join(scratch, OPTIMIZED_MODEL))
      : null;
    if (misplaced !== null) {
      // Kept as written, the graph would crash the first run of a later start (module notes).
      withoutPrepacked = misplaced;
      log(
        "info",
        "onnx",
        `${label}: optimising again to keep its graph without pre-packed weights`,
        {
          why: misplaced,
        },
      );
      await runtime.release(session);
      await emptyFolder(scratch);
      session = await openSource(saving(false));
    }
  } catch (e) {
    await removeFolder(scratch);
    log(
      "warn",
      "onnx",
      `${label}: optimising with the graph written out failed; opening as usual`,
      {
        error: errorText(e),
      },
    );
    onOutcome?.({ state: "bypassed", why: errorText(e) });
    return await openSource(plain);
  }
  const ms = Math.round(performance.now() - t0);
  try {
    const files: OptimizedRecord["files"] = [];
    for await (const e of Deno.readDir(scratch)) {
      if (!e.isFile) continue;
      await fsync(join(scratch, e.name));
      const stat = await Deno.stat(join(scratch, e.name));
      files.push({ name: e.name, size: stat.size, mtimeMs: stat.mtime?.getTime() ?? 0 });
    }
    files.sort((a, b) => a.name.localeCompare(b.name));
    if (!files.some((f) => f.name === OPTIMIZED_MODEL)) {
      throw new Error(`ONNX Runtime wrote no ${OPTIMIZED_MODEL}`);
    }
    const record: OptimizedRecord = {
      key: plan.key,
      source: plan.source,
      files,
      builtAt: new Date().toISOString(),
      buildMs: ms,
      ...(withoutPrepacked === undefined ? {} : { withoutPrepacked }),
    };
    const recordPath = join(scratch, OPTIMIZED_RECORD);
    await Deno.writeTextFile(recordPath, JSON.stringify(record, null, 2) + "\n");
    await fsync(recordPath);
    await fsync(scratch);
    // A folder another process finished first is as good as this one.
    const taken = await Deno.stat(plan.folder).then(() => true, () => false);
    if (taken) await removeFolder(scratch);
    else {
      await Deno.rename(scratch, plan.folder);
      await fsync(plan.dir);
    }
    const bytes = files.reduce((n, f) => n + f.size, 0);
    log("info", "onnx", `${label}: optimised and kept its graph for later starts`, {
      folder: plan.folder,
      ms,
      bytes,
    });
    onOutcome?.({
      state: "built",
      folder: plan.folder,
      ms,
      bytes,
      prepacked: plan.key.prepacked && withoutPrepacked === undefined,
    });
  } catch (e) {
    await removeFolder(scratch);
    log("warn", "onnx", `${label}: the optimised graph could not be kept`, {
      cache: plan.dir,
      error: errorText(e),
    });
    onOutcome?.({ state: "bypassed", why: errorText(e) });
  }
  return session;
}

/**
 * Why the pre-packed weights of the graph ONNX Runtime wrote at `path`
 * cannot be trusted at a later start, or null when every buffer starts on a
 * {@link PREPACKED_ALIGNMENT}-byte boundary of its file (or there are none).
 * A graph whose buffers cannot be read is not trusted either.
 */
export async function misplacedPrepacked(path: string): Promise<string | null> {
  let blobs;
  try {
    blobs = (await readModelInfo(path)).prepacked;
  } catch (e) {
    return `its pre-packed weights cannot be read: ${errorText(e)}`;
  }
  const off = blobs.filter((b) => b.offset % PREPACKED_ALIGNMENT !== 0);
  if (off.length === 0) return null;
  const first = off[0];
  return `ONNX Runtime wrote ${off.length} of its ${blobs.length} pre-packed weight buffers off a ` +
    `${PREPACKED_ALIGNMENT}-byte boundary (the first: ${first.tensor} at byte ${first.offset} of ` +
    `${first.location}), where its kernels' aligned loads would crash a later start`;
}

/** Removes everything inside `folder` (an attempt's files), keeping the folder. */
async function emptyFolder(folder: string): Promise<void> {
  for await (const e of Deno.readDir(folder)) {
    await Deno.remove(join(folder, e.name), { recursive: true });
  }
}

/**
 * Removes from the cache folder: scratch folders of processes that are gone;
 * folders whose model file no longer exists; of the plan's model, every
 * folder but the current one and the most recently used other one.
 */
async function sweep(dir: string, plan: Plan): Promise<void> {
  const others: Array<{ path: string; usedAt: number }> = [];
  for await (const e of Deno.readDir(dir)) {
    if (!e.isDirectory) continue;
    const path = join(dir, e.name);
    const at = e.name.indexOf(BUILDING);
    if (at >= 0) {
      const pid = Number(e.name.slice(at + BUILDING.length).split("-")[0]);
      if (!processExists(pid)) await removeFolder(path, "an interrupted write");
      continue;
    }
    if (path === plan.folder) continue;
    const record = await readRecord(path);
    if (!record) {
      // Not a folder of this cache's making (no record): left alone unless it is a slot's.
      if (e.name.startsWith(`${plan.slot}-`)) await removeFolder(path, "no record");
      continue;
    }
    if (!(await Deno.stat(record.source).then(() => true, () => false))) {
      await removeFolder(path, "its model file is gone");
    } else if (e.name.startsWith(`${plan.slot}-`)) {
      const stat = await Deno.stat(join(path, OPTIMIZED_RECORD)).catch(() => null);
      others.push({ path, usedAt: stat?.mtime?.getTime() ?? 0 });
    }
  }
  others.sort((a, b) => b.usedAt - a.usedAt);
  for (const o of others.slice(1)) await removeFolder(o.path, "superseded");
}

async function readRecord(folder: string): Promise<OptimizedRecord | undefined> {
  try {
    const r = JSON.parse(await Deno.readTextFile(join(folder, OPTIMIZED_RECORD)));
    if (
      r && typeof r === "object" && r.key && Array.isArray(r.files) && typeof r.source === "string"
    ) {
      return r as OptimizedRecord;
    }
  } catch {
    // missing or unreadable: no record
  }
  return undefined;
}

type SourceMemo = Record<string, { size: number; mtimeMs: number; ino: number; sha256: string }>;

async function loadSources(dir: string): Promise<SourceMemo> {
  try {
    const doc = JSON.parse(await Deno.readTextFile(join(dir, SOURCES)));
    if (doc?.version === 1 && doc.files && typeof doc.files === "object") {
      return doc.files as SourceMemo;
    }
  } catch {
    // none yet, or unreadable: hash again
  }
  return {};
}

async function saveSources(dir: string, memo: SourceMemo): Promise<void> {
  const files: SourceMemo = {};
  for (const [path, v] of Object.entries(memo)) {
    if (await Deno.stat(path).then(() => true, () => false)) files[path] = v;
  }
  const tmp = join(dir, `${SOURCES}.${Deno.pid}.tmp`);
  await Deno.writeTextFile(tmp, JSON.stringify({ version: 1, files }, null, 1) + "\n");
  await Deno.rename(tmp, join(dir, SOURCES));
}

/** Flushes a file or folder to disk. */
async function fsync(path: string): Promise<void> {
  using file = await Deno.open(path, { read: true });
  await file.sync();
}

/** Marks a record as used now (its mtime orders the sweep). */
async function touch(path: string): Promise<void> {
  const now = new Date();
  await Deno.utime(path, now, now).catch(() => {});
}

async function removeFolder(path: string, why?: string): Promise<void> {
  try {
    await Deno.remove(path, { recursive: true });
    if (why) log("info", "onnx", "removed a cached optimised graph", { folder: path, why });
  } catch {
    // gone already, or not ours to remove
  }
}

function digest(value: unknown): string {
  return createHash("sha256")
    .update(
      typeof value === "string" || value instanceof Uint8Array ? value : JSON.stringify(value),
    )
    .digest("hex");
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

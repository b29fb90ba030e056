/**
 * The merged-LoRA cache: the text encoder and UNet(s) with `[lora] files`
 * (the fast preset's LCM LoRA among them) merged in are derived files
 * (`derived.ts`), kept under `<models root>/.merged/<model>-<key>/` and keyed
 * by the exact inputs — the model's files and each LoRA by sha256 (verified
 * against `models.lock` or their own derived record), the LoRA weights, the
 * merge code's version (`LORA_MERGE_VERSION`). The first start (or
 * `deno task models`) merges with `mod/lora` (`patchModel`, written straight
 * into the cache folder); every later start with the same inputs checks the
 * record and opens the merged files as they are, so the fast preset starts as
 * quickly as the plain set. A model no LoRA module matches is recorded as
 * such and opened unchanged.
 *
 * Folders of other keys are swept: for each model the current one and the
 * {@link OTHER_MERGES_KEPT} most recently used others are kept, so switching
 * `[generation] preset` between fast (the LCM LoRA), turbo (the Hyper-SD
 * LoRA) and quality (no preset LoRA; a merge only with your own `[lora]
 * files`) merges nothing again once each has run, with or without your own
 * LoRAs; older ones and interrupted builds are removed. A merged UNet costs
 * the base UNet's size on disk (3.4 GB in fp32) per kept folder.
 *
 * @module
 */

import { basename, dirname, join } from "node:path";
import { log } from "../log/mod.ts";
import {
  checkLoraMatches,
  LORA_MERGE_VERSION,
  LoraSet,
  type LoraTarget,
  patchModel,
  processAlive,
} from "../lora/mod.ts";
import type { CheckedConfig } from "./check.ts";
import {
  checkDerived,
  type DerivedProblem,
  type DerivedRecipe,
  ensureDerived,
  readDerivedRecord,
  recipeKey,
} from "./derived.ts";
import { readLock } from "./lock.ts";
import { toLockPath } from "./required.ts";

/** The cache folder under the models root. */
export const MERGED_DIR = ".merged";

/**
 * Merges of other keys kept per model beside the current one: the other two
 * presets' (module docs), most recently used first.
 */
export const OTHER_MERGES_KEPT = 2;

/** What the cache needs from the resolved config. */
export interface MergeConfig extends CheckedConfig {
  /** The LoRAs to merge (absolute paths under the root), in config order. */
  lora: { files: ReadonlyArray<{ path: string; weight: number }> };
}

/** Merged models to open instead of the base set's; a missing one has no LoRA module. */
export interface MergedPaths {
  /** The text encoder with the LoRAs' `lora_te_` modules merged in. */
  textEncoder?: string;
  /** The UNet with the LoRAs' `lora_unet_` modules merged in. */
  unet?: string;
  /** The ControlNet-residual UNet likewise. */
  controlnetUnet?: string;
}

/** What a merge records about the LoRAs (for the match check on every start). */
interface MergeInfo {
  /** True: no module matched this model, so it is opened unchanged. */
  identity: boolean;
  /** Per LoRA: every module key, the keys that matched here, tensors that are no module. */
  loras: Array<{ path: string; moduleKeys: string[]; matched: string[]; unknownKeys: string[] }>;
}

/** One model the LoRAs may change. */
interface Slot {
  name: keyof MergedPaths;
  folder: string;
  target: LoraTarget;
  /** Absolute model path. */
  model: string;
}

/**
 * Makes sure every model the configured LoRAs change has its merged copy in
 * the cache; returns their paths, or undefined when there are no LoRAs or the
 * models root cannot be written (the engine then merges in memory at start-up,
 * as before the cache). The files it reads must have been verified.
 *
 * `signal` (a shutdown during start-up) abandons a merge in progress: its
 * scratch folder is removed and the signal's reason thrown (`derived.ts`).
 *
 * @throws LoraError naming the file when a LoRA cannot be read or matches no
 *   node of any model; an Error naming the model when an update does not fit
 */
export async function prepareMergedModels(
  config: MergeConfig,
  options: { signal?: AbortSignal } = {},
): Promise<MergedPaths | undefined> {
  const files = config.lora.files;
  if (files.length === 0) return undefined;
  const cache = join(config.models.root, MERGED_DIR);
  try {
    await Deno.mkdir(cache, { recursive: true });
    const probe = join(cache, `.probe-${Deno.pid}`);
    await Deno.writeTextFile(probe, "");
    await Deno.remove(probe);
  } catch (e) {
    log("warn", "models", "the merged-LoRA cache cannot be written; merging at every start", {
      folder: cache,
      error: (e as Error).message,
    });
    return undefined;
  }
  const root = config.models.root;
  let loras: LoraSet | undefined;
  const paths: MergedPaths = {};
  const infos: MergeInfo[] = [];
  for (const { slot, recipe, dir } of await mergePlan(config)) {
    const { record, built } = await ensureDerived(dir, recipe, async (into) => {
      loras ??= await LoraSet.load(files);
      const patched = await patchModel(slot.model, slot.target, loras.loras, { into });
      const info: MergeInfo = {
        identity: patched === undefined,
        loras: loras.loras.map((l, i) => ({
          path: toLockPath(l.path, root),
          moduleKeys: l.modules.map((m) => m.key),
          matched: [...(patched?.matched[i] ?? [])],
          unknownKeys: [...l.unknownKeys],
        })),
      };
      if (!patched) return { files: [], info };
      if (!patched.file) await Deno.writeFile(join(into, basename(slot.model)), patched.model);
      const names: string[] = [];
      for await (const e of Deno.readDir(into)) if (e.isFile) names.push(e.name);
      log("info", "lora", "merged LoRA weights into a cached copy", {
        model: slot.model,
        folder: dir,
        weights: patched.patched.length,
      });
      return { files: names.sort().map((name) => ({ name })), info };
    }, { signal: options.signal });
    // The folder's modification time says when it was last used (the sweep keeps the newest).
    if (!built) await Deno.utime(dir, new Date(), new Date()).catch(() => {});
    const info = record.info as MergeInfo;
    infos.push(info);
    if (!info.identity) paths[slot.name] = join(dir, basename(slot.model));
    await sweepMerged(cache, slot.folder, dir);
  }
  // Every LoRA must change some model (the same check as merging at load).
  checkLoraMatches(
    files.map((f, i) => ({
      path: f.path,
      moduleKeys: infos[0].loras[i].moduleKeys,
      unknownKeys: infos[0].loras[i].unknownKeys,
    })),
    files.map((_, i) => new Set(infos.flatMap((info) => info.loras[i].matched))),
  );
  return paths;
}

/** One cached merge as `deno task models check` reports it. */
export interface MergedCheck {
  /** The model it replaces (lock path). */
  model: string;
  /** The cache folder (lock-path form, under the root). */
  folder: string;
  /** "ok", or why it is not in place. */
  state: "ok" | DerivedProblem;
  /** What is wrong, or for "ok" whether the model is opened unchanged. */
  detail: string;
}

/**
 * The state of each merge the configured LoRAs need, without building any
 * (`deno task models check`); empty without LoRAs. A merge whose inputs are
 * not in place is "not built".
 */
export async function checkMergedModels(config: MergeConfig): Promise<MergedCheck[]> {
  if (config.lora.files.length === 0) return [];
  const root = config.models.root;
  let plan;
  try {
    plan = await mergePlan(config);
  } catch (e) {
    return [{
      model: toLockPath(config.models.base, root),
      folder: MERGED_DIR,
      state: "not built",
      detail: `waits for its inputs: ${(e as Error).message}`,
    }];
  }
  const out: MergedCheck[] = [];
  for (const { slot, recipe, dir } of plan) {
    const c = await checkDerived(dir, recipe);
    const model = toLockPath(slot.model, root);
    const folder = toLockPath(dir, root);
    out.push(
      c.ok
        ? {
          model,
          folder,
          state: "ok",
          detail: (c.record.info as MergeInfo | undefined)?.identity
            ? "no LoRA module matches it: opened unchanged"
            : "the LoRAs merged in",
        }
        : {
          model,
          folder,
          state: c.problem,
          detail: `${c.detail}; \`deno task models\` merges it (the server too, at start-up)`,
        },
    );
  }
  return out;
}

/** Each model the LoRAs may change, with the recipe and cache folder of its merge. */
async function mergePlan(
  config: MergeConfig,
): Promise<Array<{ slot: Slot; recipe: DerivedRecipe; dir: string }>> {
  const files = config.lora.files;
  const root = config.models.root;
  const cache = join(root, MERGED_DIR);
  const { files: entries, derived } = await readLock(config.models.lock);
  const byPath = new Map(entries.map((e) => [e.path, e.sha256]));
  const madeBy = new Map(derived.flatMap((d) => d.outputs.map((o) => [o, d.path] as const)));
  /** The verified sha256 of a lock path: its pin, or what its derived folder recorded. */
  const sha256Of = async (path: string): Promise<string> => {
    const pinned = byPath.get(path);
    if (pinned) return pinned;
    const folder = madeBy.get(path);
    const record = folder ? await readDerivedRecord(join(root, folder)) : undefined;
    const f = record?.files.find((x) => `${folder}/${x.name}` === path);
    if (!f) throw new Error(`${path} is neither pinned nor built (run \`deno task models\`)`);
    return f.sha256;
  };
  /** The lock paths of a model file and its companions (external data) in its folder. */
  const modelFiles = (abs: string): string[] => {
    const rel = toLockPath(abs, root);
    const dir = rel.slice(0, rel.lastIndexOf("/") + 1);
    const all = [...byPath.keys(), ...madeBy.keys()].filter((p) =>
      p.startsWith(dir) && !p.slice(dir.length).includes("/") &&
      (p === rel || !p.endsWith(".onnx")) && !p.endsWith(".json")
    );
    return [rel, ...all.filter((p) => p !== rel).sort()];
  };
  const base = config.models.base;
  const slots: Slot[] = [
    {
      name: "textEncoder",
      folder: "text_encoder",
      target: "text_encoder",
      model: join(base, "text_encoder", "model.onnx"),
    },
    { name: "unet", folder: "unet", target: "unet", model: join(base, "unet", "model.onnx") },
  ];
  const cn = config.controlnet;
  if (cn.depth.enabled || cn.openpose.enabled || cn.inpaint.enabled) {
    slots.push({
      name: "controlnetUnet",
      folder: "controlnet_unet",
      target: "unet",
      model: config.models.controlnetUnet,
    });
  }
  const loraInputs = await Promise.all(files.map(async (f) => {
    const path = toLockPath(f.path, root);
    return { path, sha256: await sha256Of(path) };
  }));
  const plan = [];
  for (const slot of slots) {
    const recipe: DerivedRecipe = {
      converter: "lora-merge",
      version: LORA_MERGE_VERSION,
      inputs: [
        ...await Promise.all(
          modelFiles(slot.model).map(async (p) => ({ path: p, sha256: await sha256Of(p) })),
        ),
        ...loraInputs,
      ],
      params: { target: slot.target, weights: files.map((f) => f.weight) },
    };
    plan.push({
      slot,
      recipe,
      dir: join(cache, `${slot.folder}-${recipeKey(recipe).slice(0, 16)}`),
    });
  }
  return plan;
}

/**
 * Removes cached merges of `folder` other than `current` and the
 * {@link OTHER_MERGES_KEPT} most recently used others (by the folder's
 * modification time, renewed at every use), and interrupted builds of dead
 * processes.
 */
async function sweepMerged(cache: string, folder: string, current: string): Promise<void> {
  const others: Array<{ path: string; usedAt: number }> = [];
  for await (const e of Deno.readDir(cache)) {
    if (!e.isDirectory || !e.name.startsWith(`${folder}-`)) continue;
    const path = join(cache, e.name);
    if (path === current) continue;
    const building = /\.building-(\d+)-/.exec(e.name);
    if (building) {
      if (!(await processAlive(Number(building[1])))) await remove(path);
      continue;
    }
    const record = await readDerivedRecord(path);
    if (!record) {
      await remove(path);
      continue;
    }
    const mtime = (await Deno.stat(path).catch(() => null))?.mtime?.getTime() ?? 0;
    others.push({ path, usedAt: Math.max(mtime, Date.parse(record.builtAt) || 0) });
  }
  others.sort((a, b) => b.usedAt - a.usedAt);
  for (const o of others.slice(OTHER_MERGES_KEPT)) await remove(o.path);
}

async function remove(path: string): Promise<void> {
  await Deno.remove(path, { recursive: true }).catch(() => {});
  log("info", "models", "removed a stale merged model", { folder: path, in: dirname(path) });
}

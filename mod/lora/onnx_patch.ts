/**
 * Blends LoRA updates into an ONNX model's initializers in memory, the way
 * onnx-web `api/onnx_web/convert/diffusion/lora.py` (`blend_loras`) does,
 * without writing the (multi-GB) files back: the model protobuf is parsed
 * (onnx-proto), kohya modules are matched to nodes by their fixed names, the
 * updates are added to the weights — inside `raw_data`, or at
 * {location, offset, length} of the external data file — in float32 (fp16
 * weights are widened, updated and narrowed again), and the result is handed
 * to ONNX Runtime as a patched copy beside the model (external data) or as
 * bytes (onnxruntime-node's `sessionOptions.externalData`).
 *
 * Weight lookup is by position, not by the names onnx-web greps for: a Conv's
 * weight is input 1, a Gemm's is input 1 (`transB` says its layout), a
 * MatMul's is its one initializer input, stored [in, out] so the torch-layout
 * ΔW [out, in] is added transposed.
 *
 * The patched graph also loses the all-zero `baddbmm` addend of diffusers'
 * attention scores where torch's exporter wrote one (`mod/onnx`
 * `dropZeroAddends`): one score-sized tensor less per attention call, so a
 * merged UNet runs in less memory and time than its base.
 *
 * @module
 */

import { basename, dirname, join } from "node:path";
import onnx from "onnx-proto";
import { log } from "../log/mod.ts";
import {
  dropZeroAddends,
  type ExternalDataFile,
  float16BitsToFloat32,
  float32ToFloat16Bits,
} from "../onnx/mod.ts";
import { GemmAdder } from "./gemm_adder.ts";
import { fixNodeName, type LoraModule, type LoraTarget } from "./kohya_keys.ts";

const P = onnx.onnx;

/** One LoRA file's modules with its user weight. */
export interface WeightedLora {
  /** The LoRA file (for messages). */
  path: string;
  /** User weight multiplying every delta. */
  weight: number;
  /** Its kohya modules. */
  modules: readonly LoraModule[];
}

/**
 * A patched model. Open `file` when it is set (a patched copy beside the
 * original, for models with external data), else `model` with
 * `externalData` from memory; then call `dispose`, which deletes the copy
 * (ONNX Runtime has read or mapped it by then).
 */
export interface PatchedModel {
  /** Model bytes (the file's own buffer, patched in place, or re-encoded). */
  model: Uint8Array;
  /** The in-memory route: every external data file the model names, with patched bytes. */
  externalData: ExternalDataFile[];
  /** The scratch route: path of the patched copy of the model (its external data beside it). */
  file?: string;
  /** Removes the scratch copy (a no-op for the in-memory route). */
  dispose(): Promise<void>;
  /** Per LoRA (same order as the input), the module keys that found a node. */
  matched: Set<string>[];
  /** Names of the initializers that were changed. */
  patched: string[];
}

/**
 * Version of what a merge writes for the same model, LoRAs and weights; part
 * of the key of every cached merged model (`mod/models/merged.ts`): bump it
 * when the merge's arithmetic or output layout changes.
 */
export const LORA_MERGE_VERSION = 2;

/** Options of {@link patchModel}. */
export interface PatchOptions {
  /**
   * An existing empty folder to write the patched copy into (a model with
   * external data: the model and its external files; `dispose` then keeps
   * them): the merged-model cache. A model without external data is still
   * returned as bytes, for the caller to write.
   */
  into?: string;
  /**
   * Where a model with external data is patched: "beside" (default) writes a
   * patched copy into a scratch folder next to the model, so the process never
   * holds the multi-GB weights twice (the bytes in JS and ONNX Runtime's copy);
   * "memory" patches the files in memory and hands them over as bytes. A
   * folder that cannot be written falls back to "memory".
   */
  scratch?: "beside" | "memory";
}

type Tensor = onnx.onnx.ITensorProto;
type Node = onnx.onnx.INodeProto;

const FLOAT = 1;
const FLOAT16 = 10;
const OP_SUFFIX = /^(.*)_(MatMul|Conv|Gemm)$/;

/** Where a node keeps the weight a LoRA module updates, and in which layout. */
interface Target {
  init: Tensor;
  /** true: stored [in, out] (MatMul, Gemm transB=0), so ΔW goes in transposed. */
  transposed: boolean;
  node: string;
}

/** The updates of one weight: its target and the scaled factors of every module that hits it. */
interface Planned {
  t: Target;
  rows: number;
  cols: number;
  updates: Array<{ up: Float32Array; down: Float32Array; rank: number }>;
}

const num = (d: number | { toNumber(): number }) => typeof d === "number" ? d : d.toNumber();

/** Writing the scratch copy failed (full disk, write refused): the in-memory route still can. */
class ScratchError extends Error {}

/** Prefix of the scratch folders (with the process id, so a crashed run's folder can be swept). */
const SCRATCH_PREFIX = ".lora-merge-";

/**
 * Reads the model at `path`, adds the update of every `target` module of
 * `loras` to its weight — ΔW = up·down × alpha/rank × weight (kohya
 * sd-scripts `networks/lora.py` `LoRAModule.merge_to`), computed by ONNX
 * Runtime's Gemm, one module at a time, so no dense ΔW is ever summed in
 * memory — and returns the patched model; `undefined` when no module matched
 * a node (the file can be opened as is).
 *
 * @throws Error naming the model, the LoRA file and the key when shapes
 *   disagree or a weight is stored in a way that cannot be patched
 */
export async function patchModel(
  path: string,
  target: LoraTarget,
  loras: readonly WeightedLora[],
  options: PatchOptions = {},
): Promise<PatchedModel | undefined> {
  const bytes = await Deno.readFile(path);
  let model: onnx.onnx.ModelProto;
  try {
    model = P.ModelProto.decode(bytes);
  } catch (e) {
    throw new Error(`${path}: cannot parse the ONNX model: ${(e as Error).message}`);
  }
  const graph = model.graph;
  if (!graph) throw new Error(`${path}: the ONNX model has no graph`);
  const inits = new Map<string, Tensor>();
  for (const t of graph.initializer ?? []) if (t.name) inits.set(t.name, t);
  const nodes = new Map<string, Node>();
  for (const n of graph.node ?? []) {
    const m = n.name ? OP_SUFFIX.exec(fixNodeName(n.name)) : null;
    if (m && !nodes.has(m[1])) nodes.set(m[1], n);
  }

  const plan = new Map<string, Planned>();
  const matched = loras.map(() => new Set<string>());
  loras.forEach((lora, li) => {
    for (const module of lora.modules) {
      if (module.target !== target) continue;
      const node = nodes.get(module.base);
      if (!node) continue;
      const where = `${path}: LoRA ${lora.path} key "${module.key}" → node "${node.name}"`;
      const t = weightOf(node, inits, where);
      const dims = (t.init.dims ?? []).map(num);
      const f = loraFactors(module, lora.weight);
      // torch layout of the weight: [out, in·k·k].
      const rows = t.transposed ? dims[1] : dims[0];
      const cols = t.transposed ? dims[0] : dims.slice(1).reduce((a, b) => a * b, 1);
      if (f.rows !== rows || f.cols !== cols) {
        throw new Error(
          `${where}: LoRA update is [${f.rows}, ${f.cols}] but the weight ` +
            `"${t.init.name}" is [${dims}] (a LoRA for another base model?)`,
        );
      }
      matched[li].add(module.key);
      let entry = plan.get(t.init.name!);
      if (!entry) plan.set(t.init.name!, entry = { t, rows, cols, updates: [] });
      entry.updates.push({ up: f.up, down: f.down, rank: f.rank });
    }
  });
  if (plan.size === 0) return undefined;
  // Only a patched model is written or handed over: the graph is simplified with it.
  const simplified = dropZeroAddends(graph).adds > 0;

  const locations = new Set<string>();
  for (const t of graph.initializer ?? []) {
    const loc = externalRef(t)?.location;
    if (loc !== undefined) locations.add(loc);
  }
  const adder = await GemmAdder.open();
  try {
    if (locations.size > 0 && options.into) {
      const kept = await patchBeside(
        path,
        bytes,
        model,
        plan,
        locations,
        options.into,
        adder,
        matched,
        simplified,
      );
      return { ...kept, dispose: () => Promise.resolve() };
    }
    if (locations.size > 0 && (options.scratch ?? "beside") === "beside") {
      const dir = await scratchDir(dirname(path));
      if (dir) {
        try {
          return await patchBeside(
            path,
            bytes,
            model,
            plan,
            locations,
            dir,
            adder,
            matched,
            simplified,
          );
        } catch (e) {
          await Deno.remove(dir, { recursive: true }).catch(() => {});
          if (!(e instanceof ScratchError)) throw e;
          // A full disk (or a write refused) costs memory, not the start.
          log(
            "warn",
            "lora",
            "patching in memory: the copy beside the model could not be written",
            {
              folder: dir,
              error: e.message,
            },
          );
        }
      }
    }
    return await patchInMemory(path, bytes, model, plan, locations, adder, matched, simplified);
  } finally {
    await adder.release();
  }
}

/** The scaled factors of one module: up [rows, rank] × weight·alpha/rank, down [rank, cols]. */
function loraFactors(module: LoraModule, weight: number) {
  const rank = module.down.shape[0];
  const rows = module.up.shape[0];
  const cols = module.down.data.length / rank;
  const scale = weight * module.alpha / rank;
  return { rows, cols, rank, up: module.up.data.map((v) => v * scale), down: module.down.data };
}

/** Patches the external files in memory and returns them as bytes (the fallback route). */
async function patchInMemory(
  path: string,
  bytes: Uint8Array,
  model: onnx.onnx.ModelProto,
  plan: ReadonlyMap<string, Planned>,
  locations: ReadonlySet<string>,
  adder: GemmAdder,
  matched: Set<string>[],
  simplified: boolean,
): Promise<PatchedModel> {
  const external = new Map<string, Uint8Array>();
  for (const loc of locations) {
    try {
      external.set(loc, await Deno.readFile(join(dirname(path), loc)));
    } catch (e) {
      throw new Error(`${path}: cannot read external data "${loc}": ${(e as Error).message}`);
    }
  }
  const inlineCopied = await patchPlanned(path, bytes, plan, adder, (ref, length, name) => {
    const file = external.get(ref.location)!;
    checkBounds(path, name, ref, length, file.length);
    // A view of the file's bytes: updated in place, nothing to write back.
    return Promise.resolve({
      region: file.subarray(ref.offset, ref.offset + length),
      commit: () => Promise.resolve(),
    });
  });
  const reencode = simplified || inlineCopied;
  return {
    model: reencode ? P.ModelProto.encode(model).finish() : bytes,
    externalData: [...external].map(([p, data]) => ({ path: p, data })),
    dispose: () => Promise.resolve(),
    matched,
    patched: [...plan.keys()],
  };
}

/** An externally stored weight's bytes, and how to store them back once updated. */
type ExternalRegion = (
  ref: { location: string; offset: number },
  length: number,
  name: string,
) => Promise<{ region: Uint8Array; commit(): Promise<void> }>;

/**
 * Adds every planned update, inline weights in `bytes` (the model's own
 * buffer) and external ones through `external`; returns whether the model
 * must be re-encoded (an inline weight that onnx-proto did not decode as a
 * view of `bytes`).
 */
async function patchPlanned(
  path: string,
  bytes: Uint8Array,
  plan: ReadonlyMap<string, Planned>,
  adder: GemmAdder,
  external: ExternalRegion,
): Promise<boolean> {
  let reencode = false;
  for (const [name, p] of plan) {
    const { count, size } = storage(path, name, p);
    const ref = externalRef(p.t.init);
    if (ref) {
      const { region, commit } = await external(ref, count * size, name);
      await applyUpdates(region, size, p, adder);
      await commit();
    } else {
      const region = inlineRegion(path, name, p, count * size);
      if (region.buffer !== bytes.buffer) reencode = true;
      await applyUpdates(region, size, p, adder);
    }
  }
  return reencode;
}

/**
 * Copies the model and its external files into `dir` and patches the copies
 * in place, one weight region at a time (read, update, write back).
 */
async function patchBeside(
  path: string,
  bytes: Uint8Array,
  model: onnx.onnx.ModelProto,
  plan: ReadonlyMap<string, Planned>,
  locations: ReadonlySet<string>,
  dir: string,
  adder: GemmAdder,
  matched: Set<string>[],
  simplified: boolean,
): Promise<PatchedModel> {
  const files = new Map<string, Deno.FsFile>();
  let reencode = simplified;
  try {
    for (const loc of locations) {
      const from = join(dirname(path), loc);
      const to = join(dir, loc);
      try {
        await Deno.stat(from);
      } catch (e) {
        throw new Error(`${path}: cannot read external data "${loc}": ${(e as Error).message}`);
      }
      await scratchWrite(to, async () => {
        await Deno.mkdir(dirname(to), { recursive: true });
        await Deno.copyFile(from, to);
      });
      files.set(loc, await Deno.open(to, { read: true, write: true }));
    }
    const inlineCopied = await patchPlanned(path, bytes, plan, adder, async (ref, length, name) => {
      const file = files.get(ref.location)!;
      checkBounds(path, name, ref, length, (await file.stat()).size);
      const region = new Uint8Array(length);
      await file.seek(ref.offset, Deno.SeekMode.Start);
      await readFully(file, region);
      return {
        region,
        async commit() {
          await file.seek(ref.offset, Deno.SeekMode.Start);
          await scratchWrite(ref.location, () => writeFully(file, region));
        },
      };
    });
    reencode ||= inlineCopied;
  } finally {
    for (const f of files.values()) f.close();
  }
  const copy = join(dir, basename(path));
  await scratchWrite(
    copy,
    () => Deno.writeFile(copy, reencode ? P.ModelProto.encode(model).finish() : bytes),
  );
  return {
    model: bytes,
    externalData: [],
    file: copy,
    dispose: () => Deno.remove(dir, { recursive: true }).catch(() => {}),
    matched,
    patched: [...plan.keys()],
  };
}

/**
 * A fresh scratch folder beside the model (same file system, so the copy is
 * cheap and never lands in a RAM-backed /tmp), after sweeping folders left by
 * processes that no longer run; `undefined` when the folder is not writable.
 */
async function scratchDir(parent: string): Promise<string | undefined> {
  try {
    for await (const e of Deno.readDir(parent)) {
      const m = e.isDirectory ? /^\.lora-merge-(\d+)-/.exec(e.name) : null;
      if (m && Number(m[1]) !== Deno.pid && !(await processAlive(Number(m[1])))) {
        await Deno.remove(join(parent, e.name), { recursive: true }).catch(() => {});
      }
    }
    return await Deno.makeTempDir({ dir: parent, prefix: `${SCRATCH_PREFIX}${Deno.pid}-` });
  } catch (e) {
    log("info", "lora", "patching in memory: no scratch folder beside the model", {
      folder: parent,
      error: (e as Error).message,
    });
    return undefined;
  }
}

/** Whether a process id is alive (Linux: /proc/<pid>); elsewhere assumed alive (never swept). */
export async function processAlive(pid: number): Promise<boolean> {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  if (Deno.build.os !== "linux") return true;
  try {
    await Deno.stat(`/proc/${pid}`);
    return true;
  } catch {
    return false;
  }
}

/** Runs a write into the scratch copy; its failure becomes a {@link ScratchError} naming `what`. */
async function scratchWrite(what: string, write: () => Promise<unknown>): Promise<void> {
  try {
    await write();
  } catch (e) {
    throw new ScratchError(`writing ${what}: ${(e as Error).message}`);
  }
}

async function readFully(file: Deno.FsFile, into: Uint8Array): Promise<void> {
  let at = 0;
  while (at < into.length) {
    const n = await file.read(into.subarray(at));
    if (n === null) throw new Error(`unexpected end of file after ${at} of ${into.length} bytes`);
    at += n;
  }
}

async function writeFully(file: Deno.FsFile, from: Uint8Array): Promise<void> {
  let at = 0;
  while (at < from.length) at += await file.write(from.subarray(at));
}

/** Element count and byte size of a planned weight; only float32 and float16 are patched. */
function storage(path: string, name: string, p: Planned): { count: number; size: 2 | 4 } {
  const init = p.t.init;
  const count = (init.dims ?? []).map(num).reduce((a, b) => a * b, 1);
  if (init.dataType !== FLOAT && init.dataType !== FLOAT16) {
    throw new Error(
      `${path}: weight "${name}" (node ${p.t.node}) has ONNX data type ${init.dataType}; ` +
        `LoRA needs float32 (1) or float16 (10)`,
    );
  }
  return { count, size: init.dataType === FLOAT ? 4 : 2 };
}

function checkBounds(
  path: string,
  name: string,
  ref: { location: string; offset: number },
  length: number,
  fileSize: number,
): void {
  if (ref.offset + length > fileSize) {
    throw new Error(
      `${path}: weight "${name}" lies at ${ref.offset}+${length} beyond ` +
        `"${ref.location}" (${fileSize} bytes)`,
    );
  }
}

/** The raw_data of an inline weight, checked against its dims. */
function inlineRegion(path: string, name: string, p: Planned, length: number): Uint8Array {
  const init = p.t.init;
  if (!init.rawData || init.rawData.length === 0) {
    throw new Error(
      `${path}: weight "${name}" (node ${p.t.node}) is not stored as raw_data or external ` +
        `data; cannot apply a LoRA to it`,
    );
  }
  if (init.rawData.length !== length) {
    throw new Error(
      `${path}: weight "${name}" has ${init.rawData.length} bytes for ${length} bytes of values`,
    );
  }
  return init.rawData;
}

/** region (little-endian float32 or float16) += every planned update, computed in float32. */
async function applyUpdates(
  region: Uint8Array,
  size: 2 | 4,
  p: Planned,
  adder: GemmAdder,
): Promise<void> {
  let w = readFloats(region, size);
  for (const u of p.updates) {
    w = await adder.add(w, u.up, u.down, {
      rows: p.rows,
      cols: p.cols,
      rank: u.rank,
      transposed: p.t.transposed,
    });
  }
  writeFloats(region, size, w);
}

function readFloats(region: Uint8Array, size: 2 | 4): Float32Array {
  const view = new DataView(region.buffer, region.byteOffset, region.byteLength);
  const n = region.length / size;
  if (size === 4) {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = view.getFloat32(4 * i, true);
    return out;
  }
  const bits = new Uint16Array(n);
  for (let i = 0; i < n; i++) bits[i] = view.getUint16(2 * i, true);
  return float16BitsToFloat32(bits);
}

function writeFloats(region: Uint8Array, size: 2 | 4, w: Float32Array): void {
  const view = new DataView(region.buffer, region.byteOffset, region.byteLength);
  if (size === 4) {
    for (let i = 0; i < w.length; i++) view.setFloat32(4 * i, w[i], true);
    return;
  }
  const narrow = float32ToFloat16Bits(w);
  for (let i = 0; i < narrow.length; i++) view.setUint16(2 * i, narrow[i], true);
}

/** The initializer a node's LoRA update goes into. */
function weightOf(node: Node, inits: ReadonlyMap<string, Tensor>, where: string): Target {
  const inputs = node.input ?? [];
  const op = node.opType;
  let init: Tensor | undefined;
  let transposed = false;
  if (op === "Conv") {
    init = inits.get(inputs[1]);
  } else if (op === "Gemm") {
    init = inits.get(inputs[1]);
    const transB = node.attribute?.find((a) => a.name === "transB");
    transposed = !transB || num(transB.i ?? 0) === 0;
  } else if (op === "MatMul") {
    const found = inputs.map((i) => inits.get(i)).filter((t) => t !== undefined);
    init = found.length === 1 ? found[0] : undefined;
    // A weight as the left operand would be W·x; torch exports x·Wᵀ (weight on the right).
    if (init && inits.get(inputs[0]) === init) init = undefined;
    transposed = true;
  } else {
    throw new Error(`${where}: the node is a ${op}, not MatMul, Conv or Gemm`);
  }
  if (!init) {
    throw new Error(`${where}: the ${op} node has no initializer weight input to patch`);
  }
  const rank = (init.dims ?? []).length;
  if ((op === "Conv" && rank < 3) || (op !== "Conv" && rank !== 2)) {
    throw new Error(`${where}: weight "${init.name}" has rank ${rank}`);
  }
  return { init, transposed, node: node.name ?? "" };
}

/** `{location, offset, length}` of an externally stored initializer. */
function externalRef(t: Tensor): { location: string; offset: number } | undefined {
  if (t.dataLocation !== P.TensorProto.DataLocation.EXTERNAL) return undefined;
  const kv = new Map((t.externalData ?? []).map((e) => [e.key, e.value]));
  const location = kv.get("location");
  if (!location) throw new Error(`initializer "${t.name}" is external but has no location`);
  return { location, offset: Number(kv.get("offset") ?? "0") };
}

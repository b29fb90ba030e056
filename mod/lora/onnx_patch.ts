/**
 * Blends LoRA updates into an ONNX model's initializers in memory, the way
 * onnx-web `api/onnx_web/convert/diffusion/lora.py` (`blend_loras`) does,
 * without writing the (multi-GB) files back: the model protobuf is parsed
 * (onnx-proto), kohya modules are matched to nodes by their fixed names, the
 * summed deltas are added to the weights — inside `raw_data`, or at
 * {location, offset, length} of the external data file — in float32 (fp16
 * weights are widened, updated and narrowed again), and the result is handed
 * to ONNX Runtime as bytes plus in-memory external data
 * (sd15-onnx.md §8, `sessionOptions.externalData`).
 *
 * Weight lookup is by position, not by the names onnx-web greps for: a Conv's
 * weight is input 1, a Gemm's is input 1 (`transB` says its layout), a
 * MatMul's is its one initializer input, stored [in, out] so the torch-layout
 * ΔW [out, in] is added transposed.
 *
 * @module
 */

import { dirname, join } from "node:path";
import onnx from "onnx-proto";
import { type ExternalDataFile, float16BitsToFloat32, float32ToFloat16Bits } from "../onnx/mod.ts";
import { fixNodeName, type LoraModule, type LoraTarget } from "./kohya_keys.ts";
import { loraDelta } from "./lora_delta.ts";

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

/** A patched model, ready for `createSessionFromBytes`. */
export interface PatchedModel {
  /** Model bytes (the file's own buffer, patched in place, or re-encoded). */
  model: Uint8Array;
  /** Every external data file the model names, with patched bytes. */
  externalData: ExternalDataFile[];
  /** Per LoRA (same order as the input), the module keys that found a node. */
  matched: Set<string>[];
  /** Names of the initializers that were changed. */
  patched: string[];
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

const num = (d: number | { toNumber(): number }) => typeof d === "number" ? d : d.toNumber();

/**
 * Reads the model at `path` (and its external data), adds the deltas of every
 * `target` module of `loras`, and returns the patched bytes; returns
 * `undefined` when no module matched a node (the file can be opened as is).
 *
 * @throws Error naming the model, the LoRA file and the key when shapes
 *   disagree or a weight is stored in a way that cannot be patched
 */
export async function patchModel(
  path: string,
  target: LoraTarget,
  loras: readonly WeightedLora[],
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

  const sums = new Map<string, { t: Target; data: Float32Array }>();
  const matched = loras.map(() => new Set<string>());
  loras.forEach((lora, li) => {
    for (const module of lora.modules) {
      if (module.target !== target) continue;
      const node = nodes.get(module.base);
      if (!node) continue;
      const where = `${path}: LoRA ${lora.path} key "${module.key}" → node "${node.name}"`;
      const t = weightOf(node, inits, where);
      const dims = (t.init.dims ?? []).map(num);
      const delta = loraDelta(module, lora.weight);
      // torch layout of the weight: [out, in·k·k].
      const rows = t.transposed ? dims[1] : dims[0];
      const cols = t.transposed ? dims[0] : dims.slice(1).reduce((a, b) => a * b, 1);
      if (delta.rows !== rows || delta.cols !== cols) {
        throw new Error(
          `${where}: LoRA update is [${delta.rows}, ${delta.cols}] but the weight ` +
            `"${t.init.name}" is [${dims}] (a LoRA for another base model?)`,
        );
      }
      matched[li].add(module.key);
      let sum = sums.get(t.init.name!);
      if (!sum) {
        sum = { t, data: new Float32Array(rows * cols) };
        sums.set(t.init.name!, sum);
      }
      // Keep the sum in the initializer's own layout.
      if (t.transposed) {
        for (let o = 0; o < rows; o++) {
          for (let i = 0; i < cols; i++) sum.data[i * rows + o] += delta.data[o * cols + i];
        }
      } else {
        for (let k = 0; k < delta.data.length; k++) sum.data[k] += delta.data[k];
      }
    }
  });
  if (sums.size === 0) return undefined;

  // Every external file the model names must be handed over in memory.
  const external = new Map<string, Uint8Array>();
  for (const t of graph.initializer ?? []) {
    const loc = externalRef(t)?.location;
    if (loc !== undefined && !external.has(loc)) {
      try {
        external.set(loc, await Deno.readFile(join(dirname(path), loc)));
      } catch (e) {
        throw new Error(`${path}: cannot read external data "${loc}": ${(e as Error).message}`);
      }
    }
  }

  let reencode = false;
  for (const [name, { t, data }] of sums) {
    const init = t.init;
    const count = (init.dims ?? []).map(num).reduce((a, b) => a * b, 1);
    const size = init.dataType === FLOAT ? 4 : init.dataType === FLOAT16 ? 2 : 0;
    if (size === 0) {
      throw new Error(
        `${path}: weight "${name}" (node ${t.node}) has ONNX data type ${init.dataType}; ` +
          `LoRA needs float32 (1) or float16 (10)`,
      );
    }
    let region: Uint8Array;
    const ref = externalRef(init);
    if (ref) {
      const file = external.get(ref.location)!;
      if (ref.offset + count * size > file.length) {
        throw new Error(
          `${path}: weight "${name}" lies at ${ref.offset}+${count * size} beyond ` +
            `"${ref.location}" (${file.length} bytes)`,
        );
      }
      region = file.subarray(ref.offset, ref.offset + count * size);
    } else if (init.rawData && init.rawData.length > 0) {
      region = init.rawData;
      // onnx-proto decodes bytes as views of the input; otherwise re-encode.
      if (region.buffer !== bytes.buffer) reencode = true;
    } else {
      throw new Error(
        `${path}: weight "${name}" (node ${t.node}) is not stored as raw_data or external ` +
          `data; cannot apply a LoRA to it`,
      );
    }
    if (region.length !== count * size) {
      throw new Error(
        `${path}: weight "${name}" has ${region.length} bytes for ${count} values of ${size} bytes`,
      );
    }
    addInPlace(region, data, size);
  }
  return {
    model: reencode ? P.ModelProto.encode(model).finish() : bytes,
    externalData: [...external].map(([p, data]) => ({ path: p, data })),
    matched,
    patched: [...sums.keys()],
  };
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

/** region (little-endian float32 or float16) += delta, computed in float32. */
function addInPlace(region: Uint8Array, delta: Float32Array, size: 2 | 4 | number): void {
  const view = new DataView(region.buffer, region.byteOffset, region.byteLength);
  const n = delta.length;
  if (size === 4) {
    for (let i = 0; i < n; i++) {
      view.setFloat32(4 * i, view.getFloat32(4 * i, true) + delta[i], true);
    }
    return;
  }
  const bits = new Uint16Array(n);
  for (let i = 0; i < n; i++) bits[i] = view.getUint16(2 * i, true);
  const wide = float16BitsToFloat32(bits);
  for (let i = 0; i < n; i++) wide[i] += delta[i];
  const narrow = float32ToFloat16Bits(wide);
  for (let i = 0; i < n; i++) view.setUint16(2 * i, narrow[i], true);
}

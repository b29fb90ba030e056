/**
 * Widens an fp16 ONNX model to fp32: every float16 initializer (inline, in
 * `int32_data`, or in external data) becomes float32 with the same values,
 * `Cast` nodes to float16 cast to float32, float16 `Constant` /
 * `ConstantOfShape` values and `dtype` attributes become float32, and the
 * graph's float16 inputs, outputs and value infos are declared float32. The
 * maths of the result is then the fp32 graph on the fp16-rounded weights:
 * fp16 → fp32 is exact, and no operation runs in half precision any more.
 *
 * The CPU execution provider has few float16 kernels, so it runs an fp16
 * graph through inserted casts with float32 copies of the weights: 1.5×
 * slower per UNet call and 3.5× the files in peak memory on the full-size
 * SD 1.5 UNet (docs/performance.md, "CPU precision").
 *
 * External data is streamed one tensor at a time (read, widen, append), so
 * the 1.7 GB fp16 UNet becomes its 3.4 GB fp32 form with one tensor in
 * memory; a model with inline weights (the text encoder, the VAE) is decoded
 * whole. Output is deterministic: the same input bytes give the same files.
 *
 * The widened graph also loses the all-zero `baddbmm` addend that torch's
 * exporter writes into diffusers' attention scores (`mod/onnx/zero_addend.ts`:
 * one score-sized tensor less per attention call, 0.74 GB less peak and a
 * quarter less time per UNet call on a full-size SD 1.5 export).
 *
 * @module
 */

import { createHash, type Hash } from "node:crypto";
import { basename, dirname, join } from "node:path";
import onnx from "onnx-proto";
import { float16BitsToFloat32 } from "../onnx/fp16.ts";
import { ELEM_BYTES } from "../onnx/model_info.ts";
import { dropZeroAddends } from "../onnx/zero_addend.ts";

const P = onnx.onnx;
type Tensor = onnx.onnx.ITensorProto;
type Graph = onnx.onnx.IGraphProto;
type TypeProto = onnx.onnx.ITypeProto;

/** Bumped whenever {@link widenToFp32} writes different bytes for the same input. */
export const FP32_CONVERTER_VERSION = 2;

const FLOAT = 1;
const FLOAT16 = 10;

/** One file a converter wrote, with what was hashed while writing it. */
export interface WrittenFile {
  /** File name inside the output folder. */
  name: string;
  /** Bytes written. */
  size: number;
  /** sha256 of the bytes written (64 lowercase hex). */
  sha256: string;
}

/** What {@link widenToFp32} changed. */
export interface WidenReport {
  /** Every file written, the model first. */
  files: WrittenFile[];
  /** float16 initializers (and Constant values) made float32. */
  tensors: number;
  /** `Cast`/`dtype` attributes that named float16. */
  casts: number;
  /** Graph inputs, outputs and value infos declared float16 before. */
  declarations: number;
  /** Zero attention-score addends dropped (`mod/onnx/zero_addend.ts`). */
  zeroAddends: number;
}

/** A model that cannot be widened; the message names the file and the tensor. */
export class WidenError extends Error {
  /** Creates an error with a complete message. */
  constructor(message: string) {
    super(message);
    this.name = "WidenError";
  }
}

/** Counters shared by the graph walk. */
interface Counts {
  tensors: number;
  casts: number;
  declarations: number;
}

/**
 * Writes the fp32 form of the model at `modelPath` into `outDir` under the
 * same file names (`model.onnx`, and each external data file it names, e.g.
 * `weights.pb`). `outDir` must exist and must not be the model's folder.
 *
 * @throws WidenError when the model cannot be parsed or names external data
 *   that is missing or too short
 */
export async function widenToFp32(modelPath: string, outDir: string): Promise<WidenReport> {
  if (dirname(modelPath) === outDir) {
    throw new WidenError(`${modelPath}: the output folder must differ from the model's`);
  }
  const bytes = await Deno.readFile(modelPath);
  let model: onnx.onnx.ModelProto;
  try {
    model = P.ModelProto.decode(bytes);
  } catch (e) {
    throw new WidenError(`${modelPath}: cannot parse the ONNX model: ${(e as Error).message}`);
  }
  if (!model.graph) throw new WidenError(`${modelPath}: the ONNX model has no graph`);
  const counts: Counts = { tensors: 0, casts: 0, declarations: 0 };
  const external = new ExternalWriter(modelPath, outDir);
  const files: WrittenFile[] = [];
  let zeroAddends = 0;
  try {
    await widenGraph(model.graph, modelPath, counts, external);
    files.push(...external.finish());
    zeroAddends = dropZeroAddends(model.graph).adds;
  } finally {
    external.close();
  }
  const encoded = P.ModelProto.encode(model).finish();
  await Deno.writeFile(join(outDir, basename(modelPath)), encoded);
  files.unshift({
    name: basename(modelPath),
    size: encoded.length,
    sha256: createHash("sha256").update(encoded).digest("hex"),
  });
  return { files, ...counts, zeroAddends };
}

/** Widens one graph (and its subgraphs) in place; external tensors are streamed to `external`. */
async function widenGraph(
  graph: Graph,
  path: string,
  counts: Counts,
  external: ExternalWriter,
): Promise<void> {
  for (const t of graph.initializer ?? []) {
    if (t.dataLocation === P.TensorProto.DataLocation.EXTERNAL) {
      if (await external.add(t)) counts.tensors++;
    } else if (widenInline(t, path)) counts.tensors++;
  }
  for (const s of graph.sparseInitializer ?? []) {
    if (s.values?.dataType === FLOAT16) {
      throw new WidenError(
        `${path}: sparse float16 initializer "${s.values.name}" is not supported`,
      );
    }
  }
  for (const v of [...(graph.input ?? []), ...(graph.output ?? []), ...(graph.valueInfo ?? [])]) {
    if (v.type && retype(v.type)) counts.declarations++;
  }
  for (const node of graph.node ?? []) {
    for (const a of node.attribute ?? []) {
      if ((a.name === "to" || a.name === "dtype") && num(a.i) === FLOAT16) {
        a.i = FLOAT;
        counts.casts++;
      }
      for (const t of [...(a.t ? [a.t] : []), ...(a.tensors ?? [])]) {
        if (t.dataLocation === P.TensorProto.DataLocation.EXTERNAL) {
          if (await external.add(t)) counts.tensors++;
        } else if (widenInline(t, path)) counts.tensors++;
      }
      for (const g of [...(a.g ? [a.g] : []), ...(a.graphs ?? [])]) {
        await widenGraph(g, path, counts, external);
      }
    }
  }
}

/** Makes a float16 type float32, inside sequences, maps and optionals too; true when changed. */
function retype(type: TypeProto): boolean {
  const tensor = type.tensorType ?? type.sparseTensorType;
  if (tensor) {
    if (tensor.elemType !== FLOAT16) return false;
    tensor.elemType = FLOAT;
    return true;
  }
  const inner = type.sequenceType?.elemType ?? type.optionalType?.elemType ??
    type.mapType?.valueType;
  return inner ? retype(inner) : false;
}

const num = (v: number | { toNumber(): number } | null | undefined): number =>
  v === null || v === undefined ? 0 : typeof v === "number" ? v : v.toNumber();

/** float16 bits (little-endian) → float32 little-endian bytes. */
function widenBytes(half: Uint8Array): Uint8Array {
  const n = half.length >> 1;
  const bits = new Uint16Array(n);
  const view = new DataView(half.buffer, half.byteOffset, half.byteLength);
  for (let i = 0; i < n; i++) bits[i] = view.getUint16(2 * i, true);
  const wide = float16BitsToFloat32(bits);
  const out = new Uint8Array(wide.length * 4);
  const outView = new DataView(out.buffer);
  for (let i = 0; i < wide.length; i++) outView.setFloat32(4 * i, wide[i], true);
  return out;
}

/** Widens an inline float16 tensor (raw_data or int32_data); true when it was float16. */
function widenInline(t: Tensor, path: string): boolean {
  if (t.dataType !== FLOAT16) return false;
  const count = (t.dims ?? []).map(num).reduce((a, b) => a * b, 1);
  let half: Uint8Array;
  if (t.rawData && t.rawData.length > 0) {
    half = t.rawData;
  } else {
    // ONNX stores float16 outside raw_data as one bit pattern per int32 element.
    const values = t.int32Data ?? [];
    half = new Uint8Array(values.length * 2);
    const view = new DataView(half.buffer);
    values.forEach((v, i) => view.setUint16(2 * i, v & 0xffff, true));
  }
  if (half.length !== count * 2) {
    throw new WidenError(
      `${path}: float16 tensor "${t.name ?? ""}" has ${half.length} bytes for ${count} values`,
    );
  }
  t.rawData = widenBytes(half);
  t.int32Data = [];
  t.dataType = FLOAT;
  return true;
}

/**
 * The output's external data files: tensors are appended in the order the
 * model names them, float16 ones widened, each file hashed while written.
 */
class ExternalWriter {
  readonly #source: string;
  readonly #outDir: string;
  readonly #in = new Map<string, Deno.FsFile>();
  readonly #out = new Map<string, { file: Deno.FsFile; size: number; hash: Hash }>();

  constructor(modelPath: string, outDir: string) {
    this.#source = modelPath;
    this.#outDir = outDir;
  }

  /** Copies (widening float16) one external tensor; true when it was float16. */
  async add(t: Tensor): Promise<boolean> {
    const kv = new Map((t.externalData ?? []).map((e) => [e.key ?? "", e.value ?? ""]));
    const location = kv.get("location");
    if (!location || location.includes("/") || location.includes("\\")) {
      throw new WidenError(
        `${this.#source}: external tensor "${t.name ?? ""}" has location ${
          JSON.stringify(location)
        }; expected a file name beside the model`,
      );
    }
    const offset = Number(kv.get("offset") ?? "0");
    const count = (t.dims ?? []).map(num).reduce((a, b) => a * b, 1);
    const element = ELEM_BYTES[t.dataType ?? 0];
    const length = kv.has("length") ? Number(kv.get("length")) : count * (element ?? 0);
    const region = await this.#read(location, offset, length, t.name ?? "");
    const half = t.dataType === FLOAT16;
    if (half && length !== count * 2) {
      throw new WidenError(
        `${this.#source}: float16 tensor "${t.name ?? ""}" has ${length} bytes for ${count} values`,
      );
    }
    const data = half ? widenBytes(region) : region;
    const out = await this.#output(location);
    const at = out.size;
    let written = 0;
    while (written < data.length) written += await out.file.write(data.subarray(written));
    out.hash.update(data);
    out.size += data.length;
    if (half) t.dataType = FLOAT;
    t.externalData = [
      { key: "location", value: location },
      { key: "offset", value: String(at) },
      { key: "length", value: String(data.length) },
    ];
    return half;
  }

  async #read(location: string, offset: number, length: number, name: string) {
    let file = this.#in.get(location);
    if (!file) {
      try {
        file = await Deno.open(join(dirname(this.#source), location), { read: true });
      } catch (e) {
        throw new WidenError(
          `${this.#source}: cannot read external data "${location}": ${(e as Error).message}`,
        );
      }
      this.#in.set(location, file);
    }
    const region = new Uint8Array(length);
    await file.seek(offset, Deno.SeekMode.Start);
    let at = 0;
    while (at < length) {
      const n = await file.read(region.subarray(at));
      if (n === null) {
        throw new WidenError(
          `${this.#source}: tensor "${name}" lies at ${offset}+${length} beyond the end of ` +
            `"${location}" (${offset + at} bytes)`,
        );
      }
      at += n;
    }
    return region;
  }

  async #output(location: string) {
    let out = this.#out.get(location);
    if (!out) {
      const file = await Deno.open(join(this.#outDir, location), {
        write: true,
        create: true,
        truncate: true,
      });
      out = { file, size: 0, hash: createHash("sha256") };
      this.#out.set(location, out);
    }
    return out;
  }

  /** The external files written, with their sizes and hashes. */
  finish(): WrittenFile[] {
    return [...this.#out].map(([name, o]) => ({
      name,
      size: o.size,
      sha256: o.hash.digest("hex"),
    }));
  }

  close(): void {
    for (const f of this.#in.values()) f.close();
    for (const o of this.#out.values()) o.file.close();
  }
}

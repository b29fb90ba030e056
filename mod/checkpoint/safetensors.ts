/**
 * Safetensors files read tensor by tensor (huggingface/safetensors README
 * "Format"): an 8-byte little-endian header size N, N bytes of JSON
 * `{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__"?: {…}}`,
 * then the tensor bytes, offsets relative to the end of the header. Every
 * byte range is checked against the file before anything is read, as the
 * reference implementation's `validate` does (`safetensors/src/tensor.rs`):
 * known dtype, shape × dtype size = range, ranges inside the data section
 * and not overlapping.
 *
 * @module
 */

import { CheckpointError } from "./errors.ts";
import { DTYPE_BYTES, isWeightDtype, WEIGHT_DTYPES, type WeightDtype } from "./dtype.ts";
import { elementCount, RandomAccessFile, type WeightFile, type WeightTensor } from "./weights.ts";

/** The safetensors reference implementation caps the header at 100 MB. */
export const MAX_SAFETENSORS_HEADER = 100_000_000;

/** One tensor's entry in a checked header. */
export interface SafetensorsEntry {
  /** Tensor name. */
  name: string;
  /** Stored element type. */
  dtype: WeightDtype;
  /** Shape. */
  shape: number[];
  /** Start of its bytes, relative to the data section. */
  begin: number;
  /** End (exclusive), relative to the data section. */
  end: number;
}

/** A checked safetensors header. */
export interface SafetensorsHeader {
  /** The tensors, in the header's order. */
  entries: SafetensorsEntry[];
  /** `__metadata__` (string values only, as the format defines). */
  metadata: Record<string, string>;
  /** Where the data section starts in the file (8 + header size). */
  dataStart: number;
}

/**
 * Reads the header size from the first 8 bytes and checks it against the
 * file size.
 *
 * @returns the JSON header's byte length
 * @throws CheckpointError naming `source`
 */
export function safetensorsHeaderSize(
  first8: Uint8Array,
  fileSize: number,
  source: string,
): number {
  const fail = (why: string): never => {
    throw new CheckpointError(`${source}: not a valid safetensors file: ${why}`);
  };
  if (fileSize < 8 || first8.length < 8) {
    fail(`${fileSize} bytes, shorter than the 8-byte header size`);
  }
  const size = new DataView(first8.buffer, first8.byteOffset, 8).getBigUint64(0, true);
  if (size > BigInt(Math.min(MAX_SAFETENSORS_HEADER, fileSize - 8))) {
    fail(`header size ${size} exceeds the file (${fileSize} bytes) or 100 MB`);
  }
  return Number(size);
}

/**
 * Parses and checks a safetensors JSON header.
 *
 * @param json the header bytes (after the 8-byte size)
 * @param dataLength bytes after the header
 * @param source file name for messages
 * @param dtypes the dtypes accepted (all by default)
 * @throws CheckpointError naming `source` and the first problem found
 */
export function parseSafetensorsHeader(
  json: Uint8Array,
  dataLength: number,
  source: string,
  dtypes: readonly WeightDtype[] = WEIGHT_DTYPES,
): SafetensorsHeader {
  const fail = (why: string): never => {
    throw new CheckpointError(`${source}: not a valid safetensors file: ${why}`);
  };
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(json));
  } catch (e) {
    fail(`header is not JSON: ${(e as Error).message}`);
  }
  if (header === null || typeof header !== "object" || Array.isArray(header)) {
    fail("header is not a JSON object");
  }
  const entries: SafetensorsEntry[] = [];
  let metadata: Record<string, string> = {};
  for (const [name, info] of Object.entries(header as Record<string, unknown>)) {
    if (name === "__metadata__") {
      if (info === null || typeof info !== "object" || Array.isArray(info)) {
        fail("__metadata__ is not an object");
      }
      metadata = Object.fromEntries(
        Object.entries(info as Record<string, unknown>).map(([k, v]) => [k, String(v)]),
      );
      continue;
    }
    const t = info as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (t === null || typeof t !== "object") fail(`entry "${name}" is not an object`);
    const dtype = t.dtype;
    if (!isWeightDtype(dtype) || !dtypes.includes(dtype)) {
      fail(`tensor "${name}" has dtype ${JSON.stringify(dtype)} (supported: ${dtypes.join(", ")})`);
    }
    const shape = t.shape;
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      fail(`tensor "${name}" has shape ${JSON.stringify(shape)}`);
    }
    const offsets = t.data_offsets;
    if (
      !Array.isArray(offsets) || offsets.length !== 2 ||
      !offsets.every((o) => Number.isSafeInteger(o) && o >= 0) || offsets[0] > offsets[1] ||
      offsets[1] > dataLength
    ) {
      fail(
        `tensor "${name}" has data_offsets ${JSON.stringify(offsets)} ` +
          `(data section is ${dataLength} bytes)`,
      );
    }
    const dims = shape as number[];
    const [begin, end] = offsets as number[];
    const need = elementCount(dims) * DTYPE_BYTES[dtype as WeightDtype];
    if (end - begin !== need) {
      fail(
        `tensor "${name}" (${dtype} [${dims}]) needs ${need} bytes, data_offsets give ${
          end - begin
        }`,
      );
    }
    entries.push({ name, dtype: dtype as WeightDtype, shape: [...dims], begin, end });
  }
  const sorted = [...entries].sort((a, b) => a.begin - b.begin || a.end - b.end);
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1];
    const cur = sorted[i];
    if (cur.begin < prev.end) {
      fail(
        `tensors "${prev.name}" [${prev.begin}, ${prev.end}) and "${cur.name}" ` +
          `[${cur.begin}, ${cur.end}) overlap`,
      );
    }
  }
  return { entries, metadata, dataStart: 8 + json.length };
}

/**
 * Opens a safetensors file: reads and checks its header only; each tensor
 * is read from the file at its offset when asked.
 *
 * @throws CheckpointError naming the file and what is wrong
 */
export async function openSafetensors(
  path: string,
): Promise<WeightFile & { metadata: Record<string, string> }> {
  const file = await RandomAccessFile.open(path);
  try {
    const size = safetensorsHeaderSize(await file.read(0, Math.min(8, file.size)), file.size, path);
    const header = parseSafetensorsHeader(await file.read(8, size), file.size - 8 - size, path);
    const tensors = new Map<string, WeightTensor>();
    for (const e of header.entries) {
      tensors.set(
        e.name,
        file.tensor(e.dtype, e.shape, header.dataStart + e.begin, e.end - e.begin),
      );
    }
    return { tensors, format: "safetensors", metadata: header.metadata, close: () => file.close() };
  } catch (e) {
    file.close();
    throw e;
  }
}

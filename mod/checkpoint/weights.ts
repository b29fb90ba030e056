/**
 * Tensors read from a file on demand: the shared shape of every weights
 * reader (safetensors, PyTorch zip and legacy files).
 *
 * @module
 */

import { open } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { CheckpointError } from "./errors.ts";
import { decodeToFloat32, DTYPE_BYTES, type WeightDtype } from "./dtype.ts";

/** One tensor of a weights file, read on demand (never the whole file in memory). */
export interface WeightTensor {
  /** The element type the file stores. */
  dtype: WeightDtype;
  /** Shape; `[]` for a scalar. */
  shape: readonly number[];
  /** Stored size in bytes (elements × dtype size). */
  byteLength: number;
  /** Reads the values, widened (or converted) to float32, in row-major order. */
  read(): Promise<Float32Array>;
  /** Reads the stored little-endian bytes as they are (for copying fp16 without a round trip). */
  readBytes(): Promise<Uint8Array>;
}

/** Tensors by name. */
export type WeightMap = ReadonlyMap<string, WeightTensor>;

/** The file formats {@link WeightFile} reads. */
export type WeightFormat = "safetensors" | "torch-zip" | "torch-legacy";

/** An open weights file. */
export interface WeightFile {
  /** Every tensor of the file (a `state_dict` wrapper already unwrapped). */
  tensors: WeightMap;
  /** What the file was read as. */
  format: WeightFormat;
  /** Closes the file; reading a tensor afterwards fails. */
  close(): void;
}

/** Number of elements of a shape. */
export function elementCount(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** The same stored data seen with another shape of the same element count (a reshape). */
export function reshaped(t: WeightTensor, shape: readonly number[]): WeightTensor {
  if (elementCount(shape) !== elementCount(t.shape)) {
    throw new RangeError(`cannot reshape [${t.shape}] to [${shape}]`);
  }
  return {
    dtype: t.dtype,
    shape: [...shape],
    byteLength: t.byteLength,
    read: () => t.read(),
    readBytes: () => t.readBytes(),
  };
}

/**
 * A file opened for positioned reads: tensors read their own byte ranges
 * (pread, so reads in flight at once do not disturb each other).
 */
export class RandomAccessFile {
  #handle: FileHandle | undefined;

  private constructor(readonly path: string, handle: FileHandle, readonly size: number) {
    this.#handle = handle;
  }

  /** Opens `path` for reading. */
  static async open(path: string): Promise<RandomAccessFile> {
    let handle: FileHandle;
    try {
      handle = await open(path, "r");
    } catch (e) {
      throw new CheckpointError(`${path}: cannot be opened: ${(e as Error).message}`);
    }
    try {
      const stat = await handle.stat();
      if (!stat.isFile()) throw new CheckpointError(`${path}: not a file`);
      return new RandomAccessFile(path, handle, stat.size);
    } catch (e) {
      await handle.close();
      throw e;
    }
  }

  /** Reads `length` bytes at `position`; fails when the file ends first. */
  async read(position: number, length: number): Promise<Uint8Array> {
    const handle = this.#handle;
    if (!handle) throw new CheckpointError(`${this.path}: read after close`);
    if (position < 0 || length < 0 || position + length > this.size) {
      throw new CheckpointError(
        `${this.path}: truncated: bytes ${position}..${
          position + length
        } are past its end (${this.size} bytes)`,
      );
    }
    const out = new Uint8Array(length);
    let done = 0;
    while (done < length) {
      const { bytesRead } = await handle.read(out, done, length - done, position + done);
      if (bytesRead === 0) {
        throw new CheckpointError(
          `${this.path}: truncated while reading at byte ${position + done}`,
        );
      }
      done += bytesRead;
    }
    return out;
  }

  /** Closes the file (idempotent). */
  close(): void {
    const handle = this.#handle;
    this.#handle = undefined;
    // The promise settles on its own; nothing waits for it.
    handle?.close().catch(() => {});
  }

  /**
   * A tensor stored as `byteLength` bytes at `position`.
   *
   * @throws RangeError when the byte length is not shape × dtype size (readers check first)
   */
  tensor(
    dtype: WeightDtype,
    shape: readonly number[],
    position: number,
    byteLength: number,
  ): WeightTensor {
    const count = elementCount(shape);
    if (count * DTYPE_BYTES[dtype] !== byteLength) {
      throw new RangeError(`${dtype} [${shape}] is not ${byteLength} bytes`);
    }
    const readBytes = () => this.read(position, byteLength);
    return {
      dtype,
      shape: [...shape],
      byteLength,
      readBytes,
      read: async () => decodeToFloat32(await readBytes(), dtype, count),
    };
  }
}

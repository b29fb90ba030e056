/**
 * Opens any weights file the project reads: safetensors, or a PyTorch
 * `.ckpt`/`.pt`/`.bin` (zip or legacy format, read without executing
 * pickle code), told apart by their first bytes rather than their names.
 *
 * @module
 */

import { CheckpointError } from "./errors.ts";
import { openSafetensors } from "./safetensors.ts";
import { openTorchFile } from "./torch.ts";
import { RandomAccessFile, type WeightFile } from "./weights.ts";

/** Local file header signature of a zip archive (PyTorch's format since 1.6). */
const ZIP_MAGIC = [0x50, 0x4b, 0x03, 0x04];
/** Pickle PROTO opcode: the legacy PyTorch format starts with a pickle. */
const PICKLE_PROTO = 0x80;

/**
 * Opens a weights file: `.safetensors`, or a PyTorch zip or legacy file
 * (`.ckpt`, `.pt`, `.bin`), whatever its extension says. A `state_dict`
 * wrapper around the tensors is unwrapped; only the header (or pickle) is
 * read now, each tensor when asked.
 *
 * @throws CheckpointError naming the file, what was found and what is supported
 */
export async function openWeightFile(path: string): Promise<WeightFile> {
  const file = await RandomAccessFile.open(path);
  let head: Uint8Array;
  try {
    head = await file.read(0, Math.min(9, file.size));
  } finally {
    file.close();
  }
  // safetensors first: its header size may start with any bytes (0x80 0x02 is a 640-byte header),
  // but its JSON opens with "{" at byte 8, where a zip has its compression method and a PyTorch
  // legacy file its magic number.
  if (head.length === 9 && head[8] === 0x7b) return unwrapSafetensors(await openSafetensors(path));
  if (head.length >= 4 && ZIP_MAGIC.every((b, i) => head[i] === b)) {
    return openTorchFile(path, "zip");
  }
  if (head.length >= 2 && head[0] === PICKLE_PROTO && head[1] >= 2 && head[1] <= 5) {
    return openTorchFile(path, "legacy");
  }
  // A damaged safetensors file gets the safetensors reader's own account of what is wrong.
  if (/\.safetensors$/i.test(path)) return unwrapSafetensors(await openSafetensors(path));
  throw new CheckpointError(
    `${path}: not a weights file (its first bytes are neither a safetensors header, a zip ` +
      `archive nor a pickle); supported: .safetensors and PyTorch .ckpt/.pt/.bin`,
  );
}

/** A safetensors file whose names all start with `state_dict.` seen without that prefix. */
function unwrapSafetensors(wf: WeightFile): WeightFile {
  const names = [...wf.tensors.keys()];
  const prefix = "state_dict.";
  if (names.length === 0 || !names.every((n) => n.startsWith(prefix))) return wf;
  const tensors = new Map([...wf.tensors].map(([k, v]) => [k.slice(prefix.length), v]));
  return { tensors, format: wf.format, close: wf.close };
}

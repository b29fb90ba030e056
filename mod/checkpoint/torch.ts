/**
 * PyTorch `.ckpt`/`.pt`/`.bin` files read without executing pickle code
 * (layout: pytorch `torch/serialization.py`, `_save` and `_legacy_save`):
 *
 * - the zip format (PyTorch 1.6+): `<dir>/data.pkl` (the object pickle),
 *   `<dir>/data/<key>` (each storage's raw little-endian bytes), `<dir>/version`;
 *   newer versions add `<dir>/byteorder`, `<dir>/.format_version`,
 *   `<dir>/.storage_alignment` and `<dir>/.data/*`;
 * - the legacy format: pickles of the magic number, the protocol version and
 *   the system info, the object pickle, the list of storage keys, then each
 *   storage as an int64 element count and its bytes.
 *
 * Tensors come from persistent ids `('storage', torch.XStorage, key,
 * location, numel)` rebuilt by `torch._utils._rebuild_tensor_v2(storage,
 * offset, size, stride, …)`; they are read from the file at their storage's
 * offset when asked.
 *
 * @module
 */

import { CheckpointError } from "./errors.ts";
import { DTYPE_BYTES } from "./dtype.ts";
import {
  PickleTruncated,
  PyDict,
  PyGlobal,
  PyOpaque,
  PyStorage,
  PyTensor,
  PyTuple,
  type PyValue,
  TORCH_STORAGE_DTYPES,
  unpickle,
} from "./pickle.ts";
import { readZipDirectory, type ZipMember } from "./zip.ts";
import { elementCount, RandomAccessFile, type WeightFile, type WeightTensor } from "./weights.ts";

/**
 * Member names AUTOMATIC1111 `modules/safe.py` accepts
 * (`^([^/]+)/((data/\d+)|version|(data\.pkl))$`), plus the data-only members
 * newer PyTorch versions write (`byteorder`, `.format_version`, `.storage_alignment`,
 * `.data/version`, `.data/serialization_id`; pytorch `torch/serialization.py` `_save`).
 */
const MEMBER =
  /^([^/]+)\/((data\/\d+)|version|(data\.pkl)|byteorder|\.format_version|\.storage_alignment|(\.data\/(version|serialization_id)))$/;
/** The object pickle of a state dict holds names and shapes, not data; beyond this it is not one. */
const MAX_PICKLE = 512 * 1024 * 1024;
/** Nested dicts followed for tensors (an embedding's `string_to_param` is one level). */
const MAX_NESTING = 16;
/** torch/serialization.py MAGIC_NUMBER and PROTOCOL_VERSION of the legacy format. */
const LEGACY_MAGIC = 0x1950a86a20f9469cfc6cn;
const LEGACY_PROTOCOL = 1001;

/** Opens a PyTorch zip or legacy file. */
export async function openTorchFile(path: string, kind: "zip" | "legacy"): Promise<WeightFile> {
  const file = await RandomAccessFile.open(path);
  try {
    const tensors = kind === "zip" ? await readZip(file) : await readLegacy(file);
    return {
      tensors,
      format: kind === "zip" ? "torch-zip" : "torch-legacy",
      close: () => file.close(),
    };
  } catch (e) {
    file.close();
    throw e;
  }
}

/** A persistent id `('storage', torch.XStorage, key, location, numel[, view_metadata])` checked. */
function storageId(
  path: string,
  pid: PyValue,
): { key: string; dtype: PyStorage["dtype"]; numel: number; view: PyValue } {
  const fail = (why: string): never => {
    throw new CheckpointError(`${path}: not a readable PyTorch pickle: ${why}`);
  };
  if (!(pid instanceof PyTuple) || pid.items[0] !== "storage") {
    return fail("a persistent id that is not a storage (only tensor storages are read)");
  }
  const [, type, key, , numel, view] = pid.items;
  if (
    !(type instanceof PyGlobal) || type.module !== "torch" ||
    !Object.hasOwn(TORCH_STORAGE_DTYPES, type.name)
  ) {
    return fail(`a storage of type ${type instanceof PyGlobal ? type.qualified : String(type)}`);
  }
  if (typeof key !== "string") return fail("a storage key that is not a string");
  if (typeof numel !== "number" || !Number.isSafeInteger(numel) || numel < 0) {
    return fail(`storage ${key} has ${String(numel)} elements`);
  }
  return { key, dtype: TORCH_STORAGE_DTYPES[type.name], numel, view: view ?? null };
}

/**
 * The tensors of the unpickled object: a `state_dict` wrapper unwrapped,
 * nested dicts flattened with `.` (an embedding's `string_to_param.*`), other
 * values (optimizer states in lists, epoch, global_step) left out.
 */
function collectTensors(
  path: string,
  root: PyValue,
  locate: (s: PyStorage) => { offset: number; size: number },
  file: RandomAccessFile,
): Map<string, WeightTensor> {
  if (!(root instanceof PyDict)) {
    throw new CheckpointError(
      `${path}: the pickle holds ${
        describe(root)
      }, not a dict of tensors; supported: a state dict ` +
        `(optionally inside {"state_dict": …})`,
    );
  }
  const inner = root.entries.get("state_dict");
  const dict = inner instanceof PyDict ? inner : root;
  const out = new Map<string, WeightTensor>();
  const walk = (d: PyDict, prefix: string, depth: number) => {
    if (depth > MAX_NESTING) {
      throw new CheckpointError(
        `${path}: dicts nested more than ${MAX_NESTING} deep (at ${prefix}); a state dict is flat`,
      );
    }
    for (const [k, v] of d.entries) {
      const name = prefix + String(k);
      if (v instanceof PyDict) walk(v, name + ".", depth + 1);
      else if (v instanceof PyTensor) out.set(name, tensorOf(path, name, v, locate, file));
      else if (v instanceof PyOpaque && v.kind.includes("tensor")) {
        throw new CheckpointError(
          `${path}: ${name} is ${v.kind}, which is not read; supported: tensors in storages`,
        );
      }
    }
  };
  walk(dict, "", 0);
  return out;
}

function describe(v: PyValue): string {
  if (v === null) return "None";
  if (Array.isArray(v)) return "a list";
  if (v instanceof PyTensor) return "a single tensor";
  if (v instanceof PyTuple) return "a tuple";
  if (v instanceof PyOpaque) return `a ${v.kind}`;
  return `a ${typeof v}`;
}

/** A contiguous tensor view as a byte range of the file. */
function tensorOf(
  path: string,
  name: string,
  t: PyTensor,
  locate: (s: PyStorage) => { offset: number; size: number },
  file: RandomAccessFile,
): WeightTensor {
  const fail = (why: string): never => {
    throw new CheckpointError(`${path}: tensor ${name}: ${why}`);
  };
  const { size, stride, storageOffset, storage } = t;
  if (size.length !== stride.length) fail(`size [${size}] and stride [${stride}] differ in length`);
  if (size.some((d) => d < 0) || storageOffset < 0) fail("negative size or offset");
  let expect = 1;
  for (let i = size.length - 1; i >= 0; i--) {
    if (size[i] !== 1 && stride[i] !== expect) {
      fail(
        `a non-contiguous view (size [${size}], stride [${stride}]); only contiguous tensors are read ` +
          `(save the state dict after .contiguous())`,
      );
    }
    expect *= size[i];
  }
  const count = elementCount(size);
  const first = storage.elementOffset + storageOffset;
  if (count > 0 && storageOffset + count > storage.numel) {
    fail(
      `elements ${storageOffset}..${
        storageOffset + count
      } are outside its ${storage.numel}-element storage`,
    );
  }
  const el = DTYPE_BYTES[storage.dtype];
  const where = locate(storage);
  const byteLength = count * el;
  if (count > 0 && first * el + byteLength > where.size) {
    fail(`its bytes run past storage ${storage.key} (${where.size} bytes)`);
  }
  return file.tensor(storage.dtype, size, where.offset + first * el, byteLength);
}

async function readZip(file: RandomAccessFile): Promise<Map<string, WeightTensor>> {
  const path = file.path;
  const fail = (why: string): never => {
    throw new CheckpointError(`${path}: not a readable PyTorch zip file: ${why}`);
  };
  const members = await readZipDirectory(file);
  const byName = new Map<string, ZipMember>();
  let dir: string | undefined;
  for (const m of members) {
    const match = MEMBER.exec(m.name);
    if (!match) {
      fail(
        `it holds a member named ${
          JSON.stringify(m.name)
        }; a PyTorch file holds only <dir>/data.pkl, ` +
          `<dir>/data/<number>, <dir>/version (and PyTorch 2.x's byteorder, .format_version, ` +
          `.storage_alignment, .data/)`,
      );
    }
    if (dir !== undefined && match![1] !== dir) {
      fail(`members in two folders, ${dir}/ and ${match![1]}/`);
    }
    dir = match![1];
    byName.set(m.name, m);
  }
  const pkl = byName.get(`${dir}/data.pkl`);
  if (!pkl) return fail("no <dir>/data.pkl member");
  const order = byName.get(`${dir}/byteorder`);
  if (order) {
    const text = new TextDecoder().decode(
      await file.read(order.dataOffset, Math.min(order.size, 16)),
    );
    if (text.trim() !== "little") {
      fail(`byte order ${JSON.stringify(text.trim())}; only little-endian storages are read`);
    }
  }
  if (pkl.size > MAX_PICKLE) fail(`a ${pkl.size}-byte data.pkl`);
  const bytes = await file.read(pkl.dataOffset, pkl.size);
  const storages = new Map<string, PyStorage>();
  let value: PyValue;
  try {
    value = unpickle(bytes, path, {
      persistentLoad(pid) {
        const id = storageId(path, pid);
        const member = byName.get(`${dir}/data/${id.key}`);
        if (!member) {
          fail(`the pickle refers to storage ${id.key}, which has no member ${dir}/data/${id.key}`);
        }
        const need = id.numel * DTYPE_BYTES[id.dtype];
        if (member!.size < need) {
          fail(
            `storage ${id.key} (${id.numel} × ${id.dtype}) needs ${need} bytes, its member has ${
              member!.size
            }`,
          );
        }
        let s = storages.get(id.key);
        if (!s) storages.set(id.key, s = new PyStorage(id.key, id.dtype, id.numel));
        return s;
      },
    }).value;
  } catch (e) {
    if (e instanceof PickleTruncated) return fail("data.pkl ends before its STOP opcode");
    throw e;
  }
  return collectTensors(path, value, (s) => {
    const m = byName.get(`${dir}/data/${s.key}`)!;
    return { offset: m.dataOffset, size: m.size };
  }, file);
}

async function readLegacy(file: RandomAccessFile): Promise<Map<string, WeightTensor>> {
  const path = file.path;
  const fail = (why: string): never => {
    throw new CheckpointError(`${path}: not a readable legacy PyTorch file: ${why}`);
  };
  // The pickles come first and are small next to the storages after them: read a window of the
  // file and widen it when a pickle runs past its end.
  let window = Math.min(file.size, 1 << 20);
  for (;;) {
    const bytes = await file.read(0, window);
    try {
      return await parseLegacy(file, bytes, fail);
    } catch (e) {
      if (!(e instanceof PickleTruncated)) throw e;
      if (window >= file.size) return fail("the file ends inside its pickles (truncated)");
      if (window >= MAX_PICKLE) return fail(`its pickles run past ${MAX_PICKLE} bytes`);
      window = Math.min(file.size, window * 4);
    }
  }
}

async function parseLegacy(
  file: RandomAccessFile,
  bytes: Uint8Array,
  fail: (why: string) => never,
): Promise<Map<string, WeightTensor>> {
  const path = file.path;
  const noStorage = {
    persistentLoad: (): PyValue => fail("a persistent id before the object pickle"),
  };
  const magic = unpickle(bytes, path, noStorage, 0);
  if (magic.value !== LEGACY_MAGIC) fail("no PyTorch magic number at its start");
  const protocol = unpickle(bytes, path, noStorage, magic.end);
  if (protocol.value !== LEGACY_PROTOCOL) {
    fail(`protocol version ${String(protocol.value)} (supported: 1001)`);
  }
  const sysInfo = unpickle(bytes, path, noStorage, protocol.end);
  if (sysInfo.value instanceof PyDict && sysInfo.value.entries.get("little_endian") === false) {
    fail("a big-endian file; only little-endian storages are read");
  }
  const roots = new Map<string, PyStorage>();
  const object = unpickle(bytes, path, {
    persistentLoad(pid) {
      const id = storageId(path, pid);
      let root = roots.get(id.key);
      if (!root) roots.set(id.key, root = new PyStorage(id.key, id.dtype, id.numel));
      if (id.view === null) return root;
      // view_metadata (view_key, offset, view_size): a storage inside the root one (older PyTorch).
      if (!(id.view instanceof PyTuple) || id.view.items.length !== 3) {
        fail("malformed storage view metadata");
      }
      const [, offset, size] = (id.view as PyTuple).items;
      if (
        typeof offset !== "number" || typeof size !== "number" || offset < 0 ||
        offset + size > id.numel
      ) {
        fail(`a storage view outside storage ${id.key}`);
      }
      return new PyStorage(id.key, id.dtype, size as number, offset as number);
    },
  }, sysInfo.end);
  const keys = unpickle(bytes, path, noStorage, object.end);
  if (!Array.isArray(keys.value) || !keys.value.every((k) => typeof k === "string")) {
    fail("the storage key list is not a list of strings");
  }
  // Then each storage: int64 element count, then its bytes.
  const where = new Map<string, { offset: number; size: number }>();
  let at = keys.end;
  for (const key of keys.value as string[]) {
    const s = roots.get(key);
    if (!s) fail(`storage ${key} is listed but no tensor uses it (its element size is unknown)`);
    const head = await file.read(at, 8).catch(() =>
      fail(`the file ends before storage ${key} (truncated)`)
    );
    const numel = new DataView(head.buffer).getBigInt64(0, true);
    if (numel !== BigInt(s!.numel)) {
      fail(`storage ${key} holds ${numel} elements, the pickle says ${s!.numel}`);
    }
    const size = s!.numel * DTYPE_BYTES[s!.dtype];
    if (at + 8 + size > file.size) fail(`storage ${key} runs past the end of the file (truncated)`);
    where.set(key, { offset: at + 8, size });
    at += 8 + size;
  }
  for (const key of roots.keys()) {
    if (!where.has(key)) fail(`storage ${key} is used but not stored`);
  }
  return collectTensors(path, object.value, (s) => where.get(s.key)!, file);
}

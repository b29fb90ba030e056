/**
 * A restricted pickle reader: it interprets the opcodes a PyTorch state dict
 * is written with (Python's `pickletools` documents each; protocols 2–5)
 * and builds plain data from them. It never runs anything: a pickle that
 * names a global outside a short allow-list of tensor, storage and
 * container types is refused at that opcode, naming the global. The
 * allow-list is anchored on AUTOMATIC1111 `modules/safe.py`
 * (`RestrictedUnpickler.find_class`), the check SD users already rely on.
 *
 * @module
 */

import { CheckpointError } from "./errors.ts";
import type { WeightDtype } from "./dtype.ts";

/** A Python tuple. */
export class PyTuple {
  /** Creates a tuple of `items`. */
  constructor(readonly items: PyValue[]) {}
}

/** A Python dict or `collections.OrderedDict` (insertion order kept). */
export class PyDict {
  /** Entries by key (strings and numbers compare by value). */
  readonly entries = new Map<PyValue, PyValue>();
}

/** An allowed global, named by the pickle (a class or function it refers to, never called here). */
export class PyGlobal {
  /** Creates a reference to `module.name`. */
  constructor(readonly module: string, readonly name: string) {}
  /** `module.name`. */
  get qualified(): string {
    return `${this.module}.${this.name}`;
  }
}

/** A storage a persistent id refers to (the tensor bytes live outside the pickle). */
export class PyStorage {
  /** Creates a storage reference. */
  constructor(
    readonly key: string,
    readonly dtype: WeightDtype,
    readonly numel: number,
    /** Elements to skip at the start of the root storage (legacy view storages). */
    readonly elementOffset = 0,
  ) {}
}

/** A tensor as `torch._utils._rebuild_tensor_v2` describes it: a strided view of a storage. */
export class PyTensor {
  /** Creates a tensor view. */
  constructor(
    readonly storage: PyStorage,
    readonly storageOffset: number,
    readonly size: number[],
    readonly stride: number[],
  ) {}
}

/** An object of an allowed class that carries no tensor data (numpy arrays, a ParameterDict, callbacks). */
export class PyOpaque {
  /** Its state as BUILD set it. */
  state: PyValue = null;
  /** Creates an opaque object of `kind`. */
  constructor(readonly kind: string) {}
}

/** A numpy dtype (`numpy.dtype('f8', False, True)` with its byte order from BUILD). */
export class PyNumpyDtype {
  /** Byte order from the BUILD state (`<`, `>`, `|` or `=`). */
  order = "<";
  /** Creates a dtype of numpy's type code `code` (`f8`, `i8`, …). */
  constructor(readonly code: string) {}
}

/** What the reader builds. */
export type PyValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | PyValue[]
  | Set<PyValue>
  | PyTuple
  | PyDict
  | PyGlobal
  | PyStorage
  | PyTensor
  | PyOpaque
  | PyNumpyDtype;

/** PyTorch storage classes and the dtype each holds. */
export const TORCH_STORAGE_DTYPES: Readonly<Record<string, WeightDtype>> = {
  DoubleStorage: "F64",
  FloatStorage: "F32",
  HalfStorage: "F16",
  BFloat16Storage: "BF16",
  LongStorage: "I64",
  IntStorage: "I32",
  ShortStorage: "I16",
  CharStorage: "I8",
  ByteStorage: "U8",
  BoolStorage: "BOOL",
};

/** `torch.<dtype>` objects that may be named (as values, never called). */
const TORCH_DTYPES = new Set([
  "float64",
  "float32",
  "float16",
  "bfloat16",
  "int64",
  "int32",
  "int16",
  "int8",
  "uint8",
  "bool",
]);

/**
 * Whether a global may be named, per AUTOMATIC1111 `modules/safe.py`
 * (`find_class`), extended only by harmless names of the same kinds (the
 * other storage types and dtypes, numpy 2's `numpy._core`, Python 3's
 * `builtins.set`).
 */
export function isAllowedGlobal(module: string, name: string): boolean {
  switch (module) {
    case "collections":
      return name === "OrderedDict";
    case "torch._utils":
      return ["_rebuild_tensor_v2", "_rebuild_parameter", "_rebuild_device_tensor_from_numpy"]
        .includes(
          name,
        );
    case "torch":
      return Object.hasOwn(TORCH_STORAGE_DTYPES, name) || TORCH_DTYPES.has(name);
    case "torch.nn.modules.container":
      return name === "ParameterDict";
    case "numpy.core.multiarray":
    case "numpy._core.multiarray":
      return name === "scalar" || name === "_reconstruct";
    case "numpy":
      return name === "dtype" || name === "ndarray";
    case "_codecs":
      return name === "encode";
    case "pytorch_lightning.callbacks":
      return name === "model_checkpoint";
    case "pytorch_lightning.callbacks.model_checkpoint":
      return name === "ModelCheckpoint";
    case "__builtin__":
    case "builtins":
      return name === "set";
    default:
      return false;
  }
}

/** What {@link unpickle} needs from its caller. */
export interface UnpickleHooks {
  /** Resolves a persistent id (PyTorch: `('storage', type, key, location, numel[, view])`). */
  persistentLoad(pid: PyValue): PyValue;
}

/** Thrown inside the reader when the bytes end before STOP (the caller may read more and retry). */
export class PickleTruncated extends Error {}

const ALLOWED_TEXT = "tensors, their storages and the containers a state dict uses " +
  "(collections.OrderedDict, torch._utils._rebuild_tensor_v2/_rebuild_parameter, torch.*Storage, " +
  "torch dtypes, numpy scalars and dtypes, _codecs.encode, set)";

/**
 * Reads one pickle from `bytes` at `start`.
 *
 * @returns the value and the position after its STOP opcode
 * @throws CheckpointError naming `source` for a refused global or a malformed pickle
 * @throws PickleTruncated when the bytes end first
 */
export function unpickle(
  bytes: Uint8Array,
  source: string,
  hooks: UnpickleHooks,
  start = 0,
): { value: PyValue; end: number } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pos = start;
  const stack: PyValue[] = [];
  // Stack heights at each MARK (pickle's metastack).
  const marks: number[] = [];
  const memo = new Map<number, PyValue>();
  const fail = (why: string): never => {
    throw new CheckpointError(`${source}: not a readable PyTorch pickle: ${why} (at byte ${pos})`);
  };
  const need = (n: number) => {
    if (pos + n > bytes.length) throw new PickleTruncated();
  };
  const u8 = () => {
    need(1);
    return bytes[pos++];
  };
  const u16 = () => {
    need(2);
    const v = view.getUint16(pos, true);
    pos += 2;
    return v;
  };
  const u32 = () => {
    need(4);
    const v = view.getUint32(pos, true);
    pos += 4;
    return v;
  };
  const u64 = () => {
    need(8);
    const v = view.getBigUint64(pos, true);
    pos += 8;
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) fail(`length ${v} is too large`);
    return Number(v);
  };
  const take = (n: number) => {
    need(n);
    const b = bytes.subarray(pos, pos + n);
    pos += n;
    return b;
  };
  const utf8 = (b: Uint8Array) => {
    try {
      return new TextDecoder("utf-8", { fatal: true }).decode(b);
    } catch {
      return fail("a string is not UTF-8");
    }
  };
  const line = () => {
    const end = bytes.indexOf(0x0a, pos);
    if (end < 0) throw new PickleTruncated();
    const s = new TextDecoder("latin1").decode(bytes.subarray(pos, end));
    pos = end + 1;
    return s;
  };
  const floor = () => (marks.length > 0 ? marks[marks.length - 1] : 0);
  const pop = (): PyValue => {
    if (stack.length <= floor()) fail("stack underflow");
    return stack.pop()!;
  };
  const top = (): PyValue => {
    if (stack.length <= floor()) fail("stack underflow");
    return stack[stack.length - 1];
  };
  const popMark = (): PyValue[] => {
    const m = marks.pop();
    if (m === undefined) return fail("no MARK");
    return stack.splice(m);
  };
  const globalOf = (module: string, name: string): PyGlobal => {
    if (
      module === "torch" && /^[A-Za-z0-9_]+Storage$/.test(name) && !isAllowedGlobal(module, name)
    ) {
      throw new CheckpointError(
        `${source}: tensors stored as torch.${name}, an element type that is not read; supported: ` +
          `${Object.keys(TORCH_STORAGE_DTYPES).map((n) => `torch.${n}`).join(", ")}`,
      );
    }
    if (!isAllowedGlobal(module, name)) {
      throw new CheckpointError(
        `${source}: refused: the pickle names the global \`${module}.${name}\`, which is not a tensor, ` +
          `storage or state-dict container; only ${ALLOWED_TEXT} are read, and nothing in the file is run`,
      );
    }
    return new PyGlobal(module, name);
  };
  const setItem = (d: PyValue, k: PyValue, v: PyValue) => {
    if (!(d instanceof PyDict)) fail("SETITEM on something that is not a dict");
    (d as PyDict).entries.set(k, v);
  };
  const int = (v: PyValue, what: string): number => {
    if (typeof v === "bigint") v = Number(v);
    if (typeof v !== "number" || !Number.isSafeInteger(v)) fail(`${what} is not an integer`);
    return v as number;
  };
  const ints = (v: PyValue, what: string): number[] => {
    if (!(v instanceof PyTuple)) return fail(`${what} is not a tuple`);
    return v.items.map((x) => int(x, what));
  };
  const call = (fn: PyValue, args: PyValue): PyValue => {
    if (!(fn instanceof PyGlobal)) return fail("REDUCE of something that is not a global");
    if (!(args instanceof PyTuple)) {
      return fail(`REDUCE of ${fn.qualified} without an argument tuple`);
    }
    const a = args.items;
    switch (fn.qualified) {
      case "collections.OrderedDict": {
        const d = new PyDict();
        if (a.length > 0) {
          if (!Array.isArray(a[0])) fail("OrderedDict of something that is not a list");
          for (const pair of a[0] as PyValue[]) {
            if (!(pair instanceof PyTuple) || pair.items.length !== 2) {
              fail("OrderedDict item is not a pair");
            }
            d.entries.set((pair as PyTuple).items[0], (pair as PyTuple).items[1]);
          }
        }
        return d;
      }
      case "builtins.set":
      case "__builtin__.set":
        return new Set(Array.isArray(a[0]) ? a[0] : []);
      case "torch._utils._rebuild_tensor_v2": {
        const storage = a[0];
        if (!(storage instanceof PyStorage)) return fail("_rebuild_tensor_v2 without a storage");
        return new PyTensor(
          storage,
          int(a[1], "storage offset"),
          ints(a[2], "size"),
          ints(a[3], "stride"),
        );
      }
      case "torch._utils._rebuild_parameter":
        return a[0];
      case "torch._utils._rebuild_device_tensor_from_numpy":
        return new PyOpaque("a tensor stored as a numpy array");
      case "numpy.core.multiarray.scalar":
      case "numpy._core.multiarray.scalar":
        return numpyScalar(a[0], a[1]);
      case "numpy.core.multiarray._reconstruct":
      case "numpy._core.multiarray._reconstruct":
        return new PyOpaque("numpy.ndarray");
      case "numpy.dtype":
        if (typeof a[0] !== "string") fail("numpy.dtype of something that is not a string");
        return new PyNumpyDtype(a[0] as string);
      case "_codecs.encode": {
        if (typeof a[0] !== "string") {
          return fail("_codecs.encode of something that is not a string");
        }
        const enc = String(a[1] ?? "utf-8").toLowerCase();
        if (enc !== "latin1" && enc !== "latin-1") fail(`_codecs.encode with encoding ${enc}`);
        const s = a[0] as string;
        const out = new Uint8Array(s.length);
        for (let i = 0; i < s.length; i++) {
          const c = s.charCodeAt(i);
          if (c > 255) fail("_codecs.encode of a character outside latin-1");
          out[i] = c;
        }
        return out;
      }
      default:
        return fail(`the pickle calls ${fn.qualified}, which only names a type`);
    }
  };
  const numpyScalar = (dtype: PyValue, data: PyValue): PyValue => {
    if (!(dtype instanceof PyNumpyDtype) || !(data instanceof Uint8Array)) {
      return fail("numpy scalar without a dtype and bytes");
    }
    const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
    const le = dtype.order !== ">";
    const sizes: Record<string, number> = {
      f8: 8,
      f4: 4,
      i8: 8,
      i4: 4,
      i2: 2,
      i1: 1,
      u1: 1,
      b1: 1,
    };
    if (data.length < (sizes[dtype.code] ?? Infinity)) fail(`numpy scalar ${dtype.code} is short`);
    switch (dtype.code) {
      case "f8":
        return dv.getFloat64(0, le);
      case "f4":
        return dv.getFloat32(0, le);
      case "i8":
        return Number(dv.getBigInt64(0, le));
      case "i4":
        return dv.getInt32(0, le);
      case "i2":
        return dv.getInt16(0, le);
      case "i1":
        return dv.getInt8(0);
      case "u1":
        return dv.getUint8(0);
      case "b1":
        return dv.getUint8(0) !== 0;
      default:
        // Not a tensor: a number of a type the reader does not decode stands as opaque.
        return new PyOpaque(`numpy scalar ${dtype.code}`);
    }
  };
  const build = (obj: PyValue, state: PyValue) => {
    if (obj instanceof PyOpaque) obj.state = state;
    else if (obj instanceof PyNumpyDtype) {
      if (state instanceof PyTuple && typeof state.items[1] === "string") {
        obj.order = state.items[1];
      }
    } else if (obj instanceof PyDict || obj instanceof PyTensor) {
      // OrderedDict state (`_metadata`) and tensor attributes: nothing the weights need.
    } else fail("BUILD on a value that takes no state");
  };
  const textInt = (s: string): PyValue => {
    const t = s.trim().replace(/L$/, "");
    if (t === "01") return true;
    if (t === "00") return false;
    if (!/^-?\d+$/.test(t)) fail(`INT ${JSON.stringify(s)}`);
    const b = BigInt(t);
    return b >= BigInt(Number.MIN_SAFE_INTEGER) && b <= BigInt(Number.MAX_SAFE_INTEGER)
      ? Number(b)
      : b;
  };

  for (;;) {
    const at = pos;
    const op = u8();
    switch (op) {
      case 0x80: // PROTO
        if (u8() > 5) fail("pickle protocol above 5");
        break;
      case 0x95: // FRAME (a length hint)
        u64();
        break;
      case 0x2e: // STOP
        return { value: pop(), end: pos };
      case 0x28: // MARK
        marks.push(stack.length);
        break;
      case 0x30: // POP (a MARK when it is on top, as pickle's load_pop does)
        if (marks.length > 0 && floor() === stack.length) marks.pop();
        else pop();
        break;
      case 0x31: // POP_MARK
        popMark();
        break;
      case 0x32: // DUP
        stack.push(top());
        break;
      case 0x4e: // NONE
        stack.push(null);
        break;
      case 0x88: // NEWTRUE
        stack.push(true);
        break;
      case 0x89: // NEWFALSE
        stack.push(false);
        break;
      case 0x4a: // BININT
        need(4);
        stack.push(view.getInt32(pos, true));
        pos += 4;
        break;
      case 0x4b: // BININT1
        stack.push(u8());
        break;
      case 0x4d: // BININT2
        stack.push(u16());
        break;
      case 0x8a: // LONG1
      case 0x8b: { // LONG4
        const n = op === 0x8a ? u8() : u32();
        if (n > 64) fail(`a ${n}-byte integer`);
        const b = take(n);
        let v = 0n;
        for (let i = n - 1; i >= 0; i--) v = (v << 8n) | BigInt(b[i]);
        if (n > 0 && b[n - 1] >= 0x80) v -= 1n << BigInt(8 * n);
        stack.push(
          v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)
            ? Number(v)
            : v,
        );
        break;
      }
      case 0x49: // INT (text)
        stack.push(textInt(line()));
        break;
      case 0x4c: // LONG (text)
        stack.push(textInt(line()));
        break;
      case 0x47: // BINFLOAT (big-endian)
        need(8);
        stack.push(view.getFloat64(pos, false));
        pos += 8;
        break;
      case 0x46: { // FLOAT (text)
        const f = Number(line());
        if (Number.isNaN(f)) fail("FLOAT is not a number");
        stack.push(f);
        break;
      }
      case 0x58: // BINUNICODE
        stack.push(utf8(take(u32())));
        break;
      case 0x8c: // SHORT_BINUNICODE
        stack.push(utf8(take(u8())));
        break;
      case 0x8d: // BINUNICODE8
        stack.push(utf8(take(u64())));
        break;
      case 0x56: // UNICODE (text, raw-unicode-escape)
        stack.push(
          line().replace(
            /\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})/g,
            (_, a, b) => String.fromCodePoint(parseInt(a ?? b, 16)),
          ),
        );
        break;
      case 0x54: // BINSTRING (Python 2 str)
        stack.push(new TextDecoder("latin1").decode(take(u32())));
        break;
      case 0x55: // SHORT_BINSTRING
        stack.push(new TextDecoder("latin1").decode(take(u8())));
        break;
      case 0x42: // BINBYTES
        stack.push(take(u32()).slice());
        break;
      case 0x43: // SHORT_BINBYTES
        stack.push(take(u8()).slice());
        break;
      case 0x8e: // BINBYTES8
        stack.push(take(u64()).slice());
        break;
      case 0x96: // BYTEARRAY8
        stack.push(take(u64()).slice());
        break;
      case 0x7d: // EMPTY_DICT
        stack.push(new PyDict());
        break;
      case 0x64: { // DICT
        const items = popMark();
        if (items.length % 2) fail("DICT with an odd number of items");
        const d = new PyDict();
        for (let i = 0; i < items.length; i += 2) d.entries.set(items[i], items[i + 1]);
        stack.push(d);
        break;
      }
      case 0x5d: // EMPTY_LIST
        stack.push([]);
        break;
      case 0x6c: // LIST
        stack.push(popMark());
        break;
      case 0x29: // EMPTY_TUPLE
        stack.push(new PyTuple([]));
        break;
      case 0x74: // TUPLE
        stack.push(new PyTuple(popMark()));
        break;
      case 0x85: // TUPLE1
        stack.push(new PyTuple([pop()]));
        break;
      case 0x86: { // TUPLE2
        const b = pop();
        stack.push(new PyTuple([pop(), b]));
        break;
      }
      case 0x87: { // TUPLE3
        const c = pop();
        const b = pop();
        stack.push(new PyTuple([pop(), b, c]));
        break;
      }
      case 0x8f: // EMPTY_SET
        stack.push(new Set());
        break;
      case 0x90: { // ADDITEMS
        const items = popMark();
        const s = top();
        if (!(s instanceof Set)) fail("ADDITEMS on something that is not a set");
        for (const i of items) (s as Set<PyValue>).add(i);
        break;
      }
      case 0x91: // FROZENSET
        stack.push(new Set(popMark()));
        break;
      case 0x61: { // APPEND
        const v = pop();
        const l = top();
        if (!Array.isArray(l)) fail("APPEND on something that is not a list");
        (l as PyValue[]).push(v);
        break;
      }
      case 0x65: { // APPENDS
        const items = popMark();
        const l = top();
        if (!Array.isArray(l)) fail("APPENDS on something that is not a list");
        (l as PyValue[]).push(...items);
        break;
      }
      case 0x73: { // SETITEM
        const v = pop();
        const k = pop();
        setItem(top(), k, v);
        break;
      }
      case 0x75: { // SETITEMS
        const items = popMark();
        if (items.length % 2) fail("SETITEMS with an odd number of items");
        const d = top();
        for (let i = 0; i < items.length; i += 2) setItem(d, items[i], items[i + 1]);
        break;
      }
      case 0x71: // BINPUT
        memo.set(u8(), top());
        break;
      case 0x72: // LONG_BINPUT
        memo.set(u32(), top());
        break;
      case 0x94: // MEMOIZE
        memo.set(memo.size, top());
        break;
      case 0x70: // PUT (text)
        memo.set(Number(textInt(line())), top());
        break;
      case 0x68: // BINGET
      case 0x6a: // LONG_BINGET
      case 0x67: { // GET (text)
        const i = op === 0x68 ? u8() : op === 0x6a ? u32() : Number(textInt(line()));
        if (!memo.has(i)) fail(`memo ${i} was never stored`);
        stack.push(memo.get(i)!);
        break;
      }
      case 0x63: { // GLOBAL
        const module = line();
        const name = line();
        stack.push(globalOf(module, name));
        break;
      }
      case 0x93: { // STACK_GLOBAL
        const name = pop();
        const module = pop();
        if (typeof module !== "string" || typeof name !== "string") {
          fail("STACK_GLOBAL of non-strings");
        }
        stack.push(globalOf(module as string, name as string));
        break;
      }
      case 0x52: { // REDUCE
        const args = pop();
        stack.push(call(pop(), args));
        break;
      }
      case 0x81: { // NEWOBJ: cls.__new__(cls, *args) of an allowed class, as an opaque object
        pop();
        const cls = pop();
        if (!(cls instanceof PyGlobal)) fail("NEWOBJ of something that is not a global");
        stack.push(
          (cls as PyGlobal).qualified === "collections.OrderedDict"
            ? new PyDict()
            : new PyOpaque((cls as PyGlobal).qualified),
        );
        break;
      }
      case 0x62: { // BUILD
        const state = pop();
        build(top(), state);
        break;
      }
      case 0x51: // BINPERSID
        stack.push(hooks.persistentLoad(pop()));
        break;
      case 0x50: // PERSID (text)
        stack.push(hooks.persistentLoad(line()));
        break;
      default:
        pos = at;
        fail(
          `opcode 0x${op.toString(16).padStart(2, "0")} is not one a state dict is written with ` +
            `(object construction, extensions and out-of-band buffers are not read)`,
        );
    }
  }
}

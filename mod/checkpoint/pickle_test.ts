import { deepStrictEqual, strictEqual, throws } from "node:assert";
import { CheckpointError } from "./errors.ts";
import {
  isAllowedGlobal,
  PickleTruncated,
  PyDict,
  PyStorage,
  PyTensor,
  PyTuple,
  type PyValue,
  unpickle,
} from "./pickle.ts";

const enc = new TextEncoder();
/** Assembles a pickle from opcodes (numbers) and raw text (strings as their UTF-8 bytes). */
function asm(...parts: (number | string | number[])[]): Uint8Array {
  const out: number[] = [];
  for (const p of parts) {
    if (typeof p === "number") out.push(p);
    else if (typeof p === "string") out.push(...enc.encode(p));
    else out.push(...p);
  }
  return Uint8Array.from(out);
}
const su = (s: string) => [0x8c, enc.encode(s).length, ...enc.encode(s)]; // SHORT_BINUNICODE
const noPid = { persistentLoad: (): PyValue => null };
const read = (b: Uint8Array) => unpickle(b, "x.pt", noPid).value;

Deno.test("pickle: protocol 4 framing, memo, STACK_GLOBAL OrderedDict, SETITEMS and containers", () => {
  const v = read(asm(
    0x80,
    4,
    0x95,
    [20, 0, 0, 0, 0, 0, 0, 0],
    su("collections"),
    0x94,
    su("OrderedDict"),
    0x94,
    0x93,
    0x94,
    0x29,
    0x52,
    0x94,
    0x28,
    su("a"),
    0x94,
    0x4b,
    7,
    su("b"),
    0x5d,
    0x28,
    0x88,
    0x89,
    0x4e,
    0x65,
    su("c"),
    0x68,
    1, // BINGET 1 = "OrderedDict"
    su("d"),
    0x8a,
    9,
    [0, 0, 0, 0, 0, 0, 0, 0, 0x80], // LONG1 -2^71
    su("e"),
    0x47,
    [0x3f, 0xf8, 0, 0, 0, 0, 0, 0], // BINFLOAT 1.5
    su("f"),
    0x4d,
    [0x34, 0x12], // BININT2
    su("g"),
    0x4a,
    [0xff, 0xff, 0xff, 0xff], // BININT -1
    su("h"),
    0x8f,
    0x28,
    0x4b,
    1,
    0x4b,
    2,
    0x90, // EMPTY_SET ADDITEMS
    su("i"),
    0x4b,
    1,
    0x4b,
    2,
    0x86, // TUPLE2
    0x75,
    0x2e,
  ));
  strictEqual(v instanceof PyDict, true);
  const d = (v as PyDict).entries;
  strictEqual(d.get("a"), 7);
  deepStrictEqual(d.get("b"), [true, false, null]);
  strictEqual(d.get("c"), "OrderedDict");
  strictEqual(d.get("d"), -(1n << 71n));
  strictEqual(d.get("e"), 1.5);
  strictEqual(d.get("f"), 0x1234);
  strictEqual(d.get("g"), -1);
  deepStrictEqual(d.get("h"), new Set([1, 2]));
  deepStrictEqual((d.get("i") as PyTuple).items, [1, 2]);
});

Deno.test("pickle: a torch tensor rebuilt from a persistent storage id, protocol 2 with BINPUT/BINGET", () => {
  const pids: PyValue[] = [];
  const hooks = {
    persistentLoad(pid: PyValue): PyValue {
      pids.push(pid);
      return new PyStorage("0", "F16", 6);
    },
  };
  const b = asm(
    0x80,
    2,
    0x7d,
    0x71,
    0,
    0x58,
    [1, 0, 0, 0],
    "w",
    0x63,
    "torch._utils\n_rebuild_tensor_v2\n",
    0x71,
    1,
    0x28,
    0x28,
    0x58,
    [7, 0, 0, 0],
    "storage",
    0x63,
    "torch\nHalfStorage\n",
    0x58,
    [1, 0, 0, 0],
    "0",
    0x58,
    [3, 0, 0, 0],
    "cpu",
    0x4b,
    6,
    0x74,
    0x51, // BINPERSID
    0x4b,
    0,
    0x4b,
    2,
    0x4b,
    3,
    0x86,
    0x4b,
    3,
    0x4b,
    1,
    0x86,
    0x89,
    0x63,
    "collections\nOrderedDict\n",
    0x29,
    0x52,
    0x74,
    0x52,
    0x73, // SETITEM
    0x2e,
  );
  const { value, end } = unpickle(b, "x.pt", hooks);
  strictEqual(end, b.length);
  const t = (value as PyDict).entries.get("w") as PyTensor;
  strictEqual(t instanceof PyTensor, true);
  deepStrictEqual([t.size, t.stride, t.storageOffset, t.storage.key], [[2, 3], [3, 1], 0, "0"]);
  strictEqual(pids.length, 1);
});

Deno.test("pickle: numpy scalars, _codecs.encode bytes, text opcodes of protocol 0", () => {
  // numpy.core.multiarray.scalar(numpy.dtype('f8', False, True) with BUILD state, b'...')
  const f8 = new Uint8Array(8);
  new DataView(f8.buffer).setFloat64(0, 0.125, true);
  const latin = String.fromCharCode(...f8);
  const v = read(asm(
    0x80,
    2,
    0x63,
    "numpy.core.multiarray\nscalar\n",
    0x63,
    "numpy\ndtype\n",
    0x58,
    [2, 0, 0, 0],
    "f8",
    0x89,
    0x88,
    0x87,
    0x52,
    0x28,
    0x4b,
    3,
    0x58,
    [1, 0, 0, 0],
    "<",
    0x4e,
    0x4e,
    0x4e,
    0x4a,
    [0xff, 0xff, 0xff, 0xff],
    0x4a,
    [0xff, 0xff, 0xff, 0xff],
    0x4b,
    0,
    0x74,
    0x62, // BUILD
    0x63,
    "_codecs\nencode\n",
    0x58,
    [enc.encode(latin).length, 0, 0, 0],
    latin,
    0x58,
    [6, 0, 0, 0],
    "latin1",
    0x86,
    0x52,
    0x86,
    0x52,
    0x2e,
  ));
  strictEqual(v, 0.125);
  deepStrictEqual(
    read(asm("(dp0\nVa\np1\nI01\nsVb\nL12L\nsVc\nF0.5\ns.")),
    (() => {
      const d = new PyDict();
      d.entries.set("a", true).set("b", 12).set("c", 0.5);
      return d;
    })(),
  );
});

Deno.test("pickle: malformed pickles and calls of types are refused, truncation is told apart", () => {
  throws(() => read(asm(0x80, 2, 0x7d)), PickleTruncated);
  throws(() => read(asm(0x80, 2, 0x58, [9, 0, 0, 0], "ab")), PickleTruncated);
  const cases: [Uint8Array, RegExp][] = [
    [asm(0x80, 2, 0x2e), /stack underflow/],
    [asm(0x80, 2, 0x69, "os\nsystem\n"), /opcode 0x69 is not one a state dict is written with/],
    [
      asm(0x80, 2, 0x63, "torch\nFloatStorage\n", 0x29, 0x52, 0x2e),
      /the pickle calls torch\.FloatStorage, which only names a type/,
    ],
    [asm(0x80, 2, 0x68, 5, 0x2e), /memo 5 was never stored/],
    [
      asm(0x80, 2, 0x4b, 1, 0x4b, 1, 0x4b, 2, 0x73, 0x2e),
      /SETITEM on something that is not a dict/,
    ],
    [
      asm(0x80, 2, 0x63, "builtins\ngetattr\n", 0x2e),
      /refused: the pickle names the global `builtins\.getattr`/,
    ],
    [asm(0x80, 2, 0x82, 1, 0x2e), /opcode 0x82/],
    [
      asm(0x80, 2, 0x63, "torch\nComplexFloatStorage\n", 0x2e),
      /tensors stored as torch\.ComplexFloatStorage, an element type that is not read; supported: torch\.DoubleStorage/,
    ],
  ];
  for (const [b, re] of cases) {
    throws(() => read(b), (e: Error) => {
      strictEqual(e instanceof CheckpointError, true, String(e));
      strictEqual(re.test(e.message), true, e.message);
      strictEqual(e.message.startsWith("x.pt: "), true);
      return true;
    });
  }
});

Deno.test("pickle: the allow-list is AUTOMATIC1111's, with harmless names of the same kinds", () => {
  for (
    const [m, n] of [
      ["collections", "OrderedDict"],
      ["torch._utils", "_rebuild_tensor_v2"],
      ["torch._utils", "_rebuild_parameter"],
      ["torch", "BFloat16Storage"],
      ["torch", "float32"],
      ["torch.nn.modules.container", "ParameterDict"],
      ["numpy.core.multiarray", "scalar"],
      ["numpy", "dtype"],
      ["_codecs", "encode"],
      ["__builtin__", "set"],
    ]
  ) strictEqual(isAllowedGlobal(m, n), true, `${m}.${n}`);
  for (
    const [m, n] of [
      ["posix", "system"],
      ["os", "system"],
      ["builtins", "eval"],
      ["builtins", "exec"],
      ["subprocess", "Popen"],
      ["torch", "load"],
      ["torch._utils", "_rebuild_qtensor"],
      ["collections", "defaultdict"],
      ["numpy", "load"],
    ]
  ) strictEqual(isAllowedGlobal(m, n), false, `${m}.${n}`);
});

import { deepStrictEqual, rejects, strictEqual } from "node:assert";
import { join } from "node:path";
import { CheckpointError } from "./errors.ts";
import { decodeToFloat32 } from "./dtype.ts";
import { float16BitsToFloat32 } from "../onnx/fp16.ts";
import { openSafetensors } from "./safetensors.ts";
import { openWeightFile } from "./weight_file.ts";
import { safetensorsBytes, testValues } from "./testing.ts";

/** A safetensors file written by hand: header JSON + raw bytes. */
function raw(header: unknown, dataBytes: number): Uint8Array {
  const head = new TextEncoder().encode(
    typeof header === "string" ? header : JSON.stringify(header),
  );
  const out = new Uint8Array(8 + head.length + dataBytes);
  new DataView(out.buffer).setBigUint64(0, BigInt(head.length), true);
  out.set(head, 8);
  return out;
}

async function withFile(bytes: Uint8Array, f: (path: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-st-" });
  try {
    const path = join(dir, "w.safetensors");
    await Deno.writeFile(path, bytes);
    await f(path);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("safetensors: every float dtype is widened exactly, integer dtypes converted, read on demand", async () => {
  const values = testValues("x", 6);
  const bytes = safetensorsBytes([
    ["f32", { shape: [2, 3], data: values, dtype: "F32" }],
    ["f16", { shape: [6], data: values, dtype: "F16" }],
    ["bf16", { shape: [3, 2], data: values, dtype: "BF16" }],
    ["f64", { shape: [6], data: values, dtype: "F64" }],
    ["i64", { shape: [1, 3], data: Float32Array.of(0, 1, -76), dtype: "I64" }],
    ["u8", { shape: [2], data: Float32Array.of(3, 255), dtype: "U8" }],
    ["scalar", { shape: [], data: Float32Array.of(0.5), dtype: "F32" }],
  ], { format: "pt" });
  await withFile(bytes, async (path) => {
    const wf = await openSafetensors(path);
    strictEqual(wf.format, "safetensors");
    deepStrictEqual(wf.metadata, { format: "pt" });
    for (const name of ["f32", "f16", "bf16", "f64"]) {
      deepStrictEqual(await wf.tensors.get(name)!.read(), values, name);
    }
    deepStrictEqual(wf.tensors.get("bf16")!.shape, [3, 2]);
    strictEqual(wf.tensors.get("f16")!.byteLength, 12);
    strictEqual(wf.tensors.get("f16")!.dtype, "F16");
    deepStrictEqual([...await wf.tensors.get("i64")!.read()], [0, 1, -76]);
    deepStrictEqual([...await wf.tensors.get("u8")!.read()], [3, 255]);
    deepStrictEqual([...await wf.tensors.get("scalar")!.read()], [0.5]);
    deepStrictEqual((await wf.tensors.get("f16")!.readBytes()).length, 12);
    wf.close();
    await rejects(wf.tensors.get("f32")!.read(), CheckpointError);
  });
});

Deno.test("safetensors: a state_dict. prefix on every name is unwrapped", async () => {
  const bytes = safetensorsBytes([
    ["state_dict.a", { shape: [1], data: Float32Array.of(1), dtype: "F32" }],
    ["state_dict.b", { shape: [1], data: Float32Array.of(2), dtype: "F32" }],
  ]);
  await withFile(bytes, async (path) => {
    const wf = await openWeightFile(path);
    deepStrictEqual([...wf.tensors.keys()], ["a", "b"]);
    deepStrictEqual([...await wf.tensors.get("b")!.read()], [2]);
    wf.close();
  });
});

Deno.test("safetensors: corrupt headers and byte ranges are refused naming the problem", async () => {
  const good = { a: { dtype: "F32", shape: [2], data_offsets: [0, 8] } };
  const cases: [Uint8Array, RegExp][] = [
    [new Uint8Array(5), /5 bytes, shorter than the 8-byte header size/],
    [
      (() => {
        const b = raw(good, 8);
        new DataView(b.buffer).setBigUint64(0, 1n << 40n, true);
        return b;
      })(),
      /header size 1099511627776 exceeds the file/,
    ],
    [raw("{not json", 0), /header is not JSON/],
    [raw("[1,2]", 0), /header is not a JSON object/],
    [
      raw({ a: { dtype: "F8_E4M3", shape: [2], data_offsets: [0, 2] } }, 2),
      /dtype "F8_E4M3" \(supported: F64, F32/,
    ],
    [raw({ a: { dtype: "F32", shape: [2, -1], data_offsets: [0, 8] } }, 8), /has shape \[2,-1\]/],
    [raw(good, 4), /data_offsets \[0,8\] \(data section is 4 bytes\)/],
    [
      raw({ a: { dtype: "F32", shape: [3], data_offsets: [0, 8] } }, 8),
      /needs 12 bytes, data_offsets give 8/,
    ],
    [
      raw({
        a: { dtype: "F32", shape: [2], data_offsets: [0, 8] },
        b: { dtype: "F32", shape: [2], data_offsets: [4, 12] },
      }, 12),
      /"a" \[0, 8\) and "b" \[4, 12\) overlap/,
    ],
  ];
  for (const [bytes, message] of cases) {
    await withFile(bytes, async (path) => {
      await rejects(openSafetensors(path), (e: Error) => {
        strictEqual(e instanceof CheckpointError, true);
        strictEqual(message.test(e.message), true, e.message);
        strictEqual(e.message.startsWith(path), true);
        strictEqual(e.message.includes("\n"), false);
        return true;
      });
    });
  }
});

Deno.test("safetensors: a file cut short after its header is refused when opened", async () => {
  const bytes = safetensorsBytes([["a", { shape: [64], data: testValues("a", 64), dtype: "F32" }]]);
  await withFile(bytes.subarray(0, bytes.length - 10), async (path) => {
    await rejects(openWeightFile(path), /data section is 246 bytes/);
  });
});

Deno.test("safetensors: a tensor past 4 GiB in a (sparse) file is read at its offset", async () => {
  // Full-size fp32 SD 1.5 checkpoints are 4.3 GB: offsets beyond 32 bits must work.
  const pad = 4_500_000_000;
  const values = testValues("far", 16);
  const header = JSON.stringify({
    pad: { dtype: "U8", shape: [pad], data_offsets: [0, pad] },
    far: { dtype: "F32", shape: [4, 4], data_offsets: [pad, pad + 64] },
  });
  const head = new TextEncoder().encode(header);
  const dir = await Deno.makeTempDir({ prefix: "ckpt-st-" });
  const path = join(dir, "sparse.safetensors");
  try {
    const f = await Deno.open(path, { write: true, create: true });
    try {
      const size = new Uint8Array(8);
      new DataView(size.buffer).setBigUint64(0, BigInt(head.length), true);
      await f.write(size);
      await f.write(head);
      await f.seek(8 + head.length + pad, Deno.SeekMode.Start);
      await f.write(new Uint8Array(values.buffer));
    } finally {
      f.close();
    }
    const wf = await openSafetensors(path);
    deepStrictEqual(await wf.tensors.get("far")!.read(), values);
    wf.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("dtype: every binary16 pattern widens as the fp16 module decodes it, NaN and infinities included", () => {
  const bits = Uint16Array.from({ length: 65536 }, (_, i) => i);
  const got = decodeToFloat32(new Uint8Array(bits.buffer), "F16", 65536);
  const want = float16BitsToFloat32(bits);
  // Compare bit patterns so NaNs and -0 count too.
  deepStrictEqual(new Uint32Array(got.buffer), new Uint32Array(want.buffer));
  strictEqual(got[0x3c00], 1);
  strictEqual(got[0xfc00], -Infinity);
});

Deno.test("safetensors: a header size whose first bytes look like a pickle's is still safetensors", async () => {
  // 0x80 0x02 starts a protocol-2 pickle and also a 640-byte header size.
  const name = "x".repeat(640 - 60);
  let json = JSON.stringify({ [name]: { dtype: "F32", shape: [1], data_offsets: [0, 4] } });
  json = json.padEnd(640, " ");
  const head = new TextEncoder().encode(json);
  const bytes = new Uint8Array(8 + 640 + 4);
  new DataView(bytes.buffer).setBigUint64(0, 640n, true);
  bytes.set(head, 8);
  new DataView(bytes.buffer).setFloat32(8 + 640, 0.75, true);
  strictEqual(bytes[0], 0x80);
  strictEqual(bytes[1], 0x02);
  await withFile(bytes, async (path) => {
    const wf = await openWeightFile(path);
    strictEqual(wf.format, "safetensors");
    deepStrictEqual([...await wf.tensors.get(name)!.read()], [0.75]);
    wf.close();
  });
  await withFile(new TextEncoder().encode("hello, this is not a model"), async (path) => {
    const other = path.replace(/\.safetensors$/, ".onnx");
    await Deno.rename(path, other);
    await rejects(openWeightFile(other), /not a weights file \(its first bytes are neither/);
    await Deno.rename(other, path);
  });
});

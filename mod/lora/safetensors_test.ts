import { deepStrictEqual, strictEqual, throws } from "node:assert";
import { parseSafetensors, SafetensorsError } from "./safetensors.ts";

/** A safetensors file written by hand: header JSON + raw little-endian bytes. */
function file(header: string, data: number[]): Uint8Array {
  const head = new TextEncoder().encode(header);
  const out = new Uint8Array(8 + head.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(head.length), true);
  out.set(head, 8);
  out.set(data, 8 + head.length);
  return out;
}

Deno.test("safetensors: F32, F16 and BF16 tensors decode to float32", () => {
  // F32 1.5 = 0x3FC00000, -2 = 0xC0000000 (little-endian bytes below).
  // F16 1.0 = 0x3C00, -0.5 = 0xB800, 65504 = 0x7BFF (IEEE 754 binary16).
  // BF16 3.0 = 0x4040 (top half of float32 0x40400000).
  const header = JSON.stringify({
    __metadata__: { format: "pt" },
    a: { dtype: "F32", shape: [2], data_offsets: [0, 8] },
    b: { dtype: "F16", shape: [1, 3], data_offsets: [8, 14] },
    c: { dtype: "BF16", shape: [], data_offsets: [14, 16] },
  });
  const bytes = file(header, [
    0x00,
    0x00,
    0xc0,
    0x3f,
    0x00,
    0x00,
    0x00,
    0xc0,
    0x00,
    0x3c,
    0x00,
    0xb8,
    0xff,
    0x7b,
    0x40,
    0x40,
  ]);
  const t = parseSafetensors(bytes, "x.safetensors");
  deepStrictEqual([...t.keys()], ["a", "b", "c"]);
  deepStrictEqual(t.get("a"), { dtype: "F32", shape: [2], data: Float32Array.of(1.5, -2) });
  deepStrictEqual(t.get("b"), {
    dtype: "F16",
    shape: [1, 3],
    data: Float32Array.of(1, -0.5, 65504),
  });
  deepStrictEqual(t.get("c"), { dtype: "BF16", shape: [], data: Float32Array.of(3) });
});

Deno.test("safetensors: an unaligned data section still decodes", () => {
  // The header length makes the F32 value start at an offset that is not a multiple of 4.
  const header = '{"v":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}';
  const bytes = file(header, [0x00, 0x00, 0x80, 0x3f]);
  strictEqual((8 + header.length) % 4 !== 0, true);
  deepStrictEqual(parseSafetensors(bytes, "u").get("v")?.data, Float32Array.of(1));
});

Deno.test("safetensors: header problems name the file and what is wrong", () => {
  const check = (bytes: Uint8Array, re: RegExp) =>
    throws(() => parseSafetensors(bytes, "/m/lora/bad.safetensors"), (e: Error) => {
      strictEqual(e instanceof SafetensorsError, true);
      strictEqual(
        e.message.startsWith("/m/lora/bad.safetensors: not a valid safetensors file"),
        true,
      );
      return re.test(e.message);
    });
  check(new Uint8Array(5), /5 bytes, shorter than the 8-byte header size/);
  const huge = file("{}", []);
  new DataView(huge.buffer).setBigUint64(0, 1000n, true);
  check(huge, /header size 1000 exceeds the file \(10 bytes\)/);
  check(file("{nope", []), /header is not JSON/);
  check(file("[1]", []), /header is not a JSON object/);
  check(
    file('{"w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}', [0, 0, 0, 0, 0, 0, 0, 0]),
    /tensor "w" has dtype "I64"/,
  );
  // A name inherited from Object.prototype is no dtype either.
  check(
    file('{"w":{"dtype":"constructor","shape":[1],"data_offsets":[0,4]}}', [0, 0, 0, 0]),
    /tensor "w" has dtype "constructor" \(supported: F32, F16, BF16\)/,
  );
  check(
    file('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', [0, 0, 0, 0]),
    /tensor "w" \(F32 \[2\]\) needs 8 bytes, data_offsets give 4/,
  );
  check(
    file('{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}}', [0, 0, 0, 0]),
    /data_offsets \[0,8\] \(data section is 4 bytes\)/,
  );
  check(file('{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}', []), /shape \[-1\]/);
});

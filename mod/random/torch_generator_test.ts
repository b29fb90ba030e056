import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { TorchGenerator } from "./torch_generator.ts";
import type { NormalKernel } from "./torch_generator.ts";
import { randomSeedU32 } from "./seed.ts";

/** Rounds like torch's 4-decimal tensor printing. */
function round4(values: ArrayLike<number>): number[] {
  return Array.from(values, (v) => Math.round(v * 1e4) / 1e4);
}

Deno.test("randn: published torch outputs, scalar path (numel < 16)", () => {
  // torch.manual_seed(0); torch.randn(4) -> [1.5410, -0.2934, -2.1788, 0.5684]
  // (also printed for torch.randn(3, 4), seed 0, in many tutorials; the first
  // 12 values below are that 3x4 tensor).
  deepStrictEqual(round4(new TorchGenerator(0).randn(4)), [1.541, -0.2934, -2.1788, 0.5684]);
  deepStrictEqual(round4(new TorchGenerator(0).randn(12)), [
    1.541,
    -0.2934,
    -2.1788,
    0.5684,
    -1.0845,
    -1.3986,
    0.4033,
    0.838,
    -0.7193,
    -0.4033,
    -0.5966,
    0.182,
  ]);
  // torch.manual_seed(42); torch.randn(2, 3) -> [[0.3367, 0.1288, 0.2345],
  // [0.2303, -1.1229, -0.1863]] (https://sprintchase.com/?p=9243).
  deepStrictEqual(round4(new TorchGenerator(42).randn(6)), [
    0.3367,
    0.1288,
    0.2345,
    0.2303,
    -1.1229,
    -0.1863,
  ]);
});

Deno.test("randn: published torch outputs, vector path (numel >= 16)", () => {
  // kornia/kornia kornia/augmentation/_2d/geometric/center_crop.py docstring:
  // torch.manual_seed(0); torch.randn(1, 1, 4, 4).
  deepStrictEqual(round4(new TorchGenerator(0).randn(16)), [
    -1.1258,
    -1.1524,
    -0.2506,
    -0.4339,
    0.8487,
    0.692,
    -0.316,
    -2.1152,
    0.3223,
    -1.2633,
    0.35,
    0.3081,
    0.1198,
    1.2377,
    1.1168,
    -0.2473,
  ]);
  // kornia/kornia kornia/augmentation/_3d/geometric/center_crop.py docstring:
  // torch.manual_seed(0); torch.randn(1, 1, 2, 4, 6) (48 values, 3 blocks).
  deepStrictEqual(round4(new TorchGenerator(0).randn(48)), [
    ...[-1.1258, -1.1524, -0.2506, -0.4339, 0.8487, 0.692],
    ...[-0.316, -2.1152, 0.3223, -1.2633, 0.35, 0.3081],
    ...[0.1198, 1.2377, 1.1168, -0.2473, -1.3527, -1.6959],
    ...[0.5667, 0.7935, 0.5988, -1.5551, -0.3414, 1.853],
    ...[0.7502, -0.5855, -0.1734, 0.1835, 1.3894, 1.5863],
    ...[0.9463, -0.8437, -0.6136, 0.0316, -0.4927, 0.2484],
    ...[0.4397, 0.1124, 0.6408, 0.4412, -0.1023, 0.7924],
    ...[-0.2897, 0.0525, 0.5229, 2.3022, -1.4689, -1.5867],
  ]);
});

Deno.test("randn: tail recomputation when numel % 16 != 0 (published)", () => {
  // kornia/kornia kornia/augmentation/_3d/geometric/crop.py (RandomCrop3D)
  // docstring: torch.manual_seed(0); torch.randn(1, 1, 3, 3, 3) cropped to the
  // 2x2x2 corner at the origin gives [[-1.1258, -1.1524], [-0.4339, 0.8487]],
  // [[-1.2633, 0.3500], [0.1665, 0.8744]], i.e. flat indices 0,1,3,4,9,10,12,13.
  // 12 and 13 lie in the recomputed last 16 (indices 11..26) and differ from
  // randn(16)[12..13] above.
  const v = new TorchGenerator(0).randn(27);
  deepStrictEqual(round4([0, 1, 3, 4, 9, 10, 12, 13].map((i) => v[i])), [
    -1.1258,
    -1.1524,
    -0.4339,
    0.8487,
    -1.2633,
    0.35,
    0.1665,
    0.8744,
  ]);
});

Deno.test("randn: successive calls continue the stream and the cached normal (published)", () => {
  // pytorch/pytorch issue #80202: torch.manual_seed(0); randn(1, 7)[:, 0] is
  // 1.5410, the next randn(1, 7)[:, 0] is 0.8380, and randn(2, 7)[:, 0] after
  // re-seeding is [1.5410, 0.8380]. The second call's first value is the
  // Box-Muller sine cached by the first call.
  const g = new TorchGenerator(0);
  strictEqual(round4(g.randn(7))[0], 1.541);
  strictEqual(round4(g.randn(7))[0], 0.838);
  const both = new TorchGenerator(0).randn(14);
  deepStrictEqual(round4([both[0], both[7]]), [1.541, 0.838]);
  // Same issue with 8 columns: 1.5410, then -0.7193; randn(2, 8) (16 values,
  // vector path) gives [-1.1258, 0.3223] in column 0.
  const h = new TorchGenerator(0);
  strictEqual(round4(h.randn(8))[0], 1.541);
  strictEqual(round4(h.randn(8))[0], -0.7193);
  const sixteen = new TorchGenerator(0).randn(16);
  deepStrictEqual(round4([sixteen[0], sixteen[8]]), [-1.1258, 0.3223]);
});

Deno.test("rand: published torch.rand output", () => {
  // github.com/being-aerys/Deep_Learning_Marathon_with_PyTorch:
  // torch.manual_seed(42); torch.rand(1, 5) -> [0.8823, 0.9150, 0.3829, 0.9593, 0.3904].
  deepStrictEqual(round4(new TorchGenerator(42).rand(5)), [0.8823, 0.915, 0.3829, 0.9593, 0.3904]);
});

interface FixtureCall {
  op: "randn" | "rand";
  count: number;
  stride?: number;
  /** base64 of little-endian float32 values */
  values: string;
}
interface FixtureCase {
  seed: number | string;
  calls: FixtureCall[];
}

const fixture = JSON.parse(
  Deno.readTextFileSync(new URL("./testdata/torch_randn_fixture.json", import.meta.url)),
) as Record<"default" | "avx2", FixtureCase[]> & { torch_version: string };

/** Decodes base64 little-endian float32 (the fixture's storage format). */
function decodeF32(b64: string): Float32Array {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const view = new DataView(bytes.buffer);
  return Float32Array.from({ length: bytes.length / 4 }, (_, i) => view.getFloat32(i * 4, true));
}

/** Replays a fixture and returns the per-value |ours - torch| differences. */
function replay(cases: FixtureCase[], normalKernel: NormalKernel): number[] {
  const diffs: number[] = [];
  for (const c of cases) {
    const g = new TorchGenerator(BigInt(c.seed), { normalKernel });
    for (const call of c.calls) {
      const got = call.op === "randn" ? g.randn(call.count) : g.rand(call.count);
      const stride = call.stride ?? 1;
      decodeF32(call.values).forEach((want, i) => diffs.push(Math.abs(got[i * stride] - want)));
    }
  }
  return diffs;
}

// testdata/torch_randn_fixture.json was written by real PyTorch (see
// make_torch_fixture.py for provenance): seeds 0/42/1234/2^32-1 and
// out-of-range seeds, sizes 1..100, successive mixed calls, SD latents.

Deno.test("randn: bit-identical to real torch's AVX2 kernel (all x86-64 machines; the default)", () => {
  const diffs = replay(fixture.avx2, "avx2");
  ok(diffs.length > 2500, `fixture has ${diffs.length} values`);
  const differing = diffs.filter((d) => d !== 0).length;
  strictEqual(differing, 0, `${differing} of ${diffs.length} values differ`);
  // and the default kernel is avx2
  const g = new TorchGenerator(0);
  deepStrictEqual(g.randn(48), new TorchGenerator(0, { normalKernel: "avx2" }).randn(48));
});

Deno.test("randn: within 1 float32 ulp of torch's scalar kernel (ARM builds)", () => {
  const diffs = replay(fixture.default, "scalar");
  ok(diffs.length > 2500, `fixture has ${diffs.length} values`);
  const exact = diffs.filter((d) => d === 0).length;
  const worst = Math.max(...diffs);
  // |v| < 8 so one float32 ulp is at most 2^-21 ≈ 4.8e-7.
  ok(worst <= 4.8e-7, `worst difference ${worst}`);
  ok(exact / diffs.length > 0.95, `only ${exact}/${diffs.length} values bit-identical`);
});

Deno.test("randn: the two kernels agree to ~2e-6 and share the scalar path below 16", () => {
  const a = new TorchGenerator(3, { normalKernel: "avx2" }).randn(4096);
  const b = new TorchGenerator(3, { normalKernel: "scalar" }).randn(4096);
  let worst = 0;
  a.forEach((v, i) => (worst = Math.max(worst, Math.abs(v - b[i]))));
  ok(worst > 0 && worst < 3e-6, `worst difference ${worst}`);
  deepStrictEqual(
    new TorchGenerator(3, { normalKernel: "avx2" }).randn(15),
    new TorchGenerator(3, { normalKernel: "scalar" }).randn(15),
  );
  throws(
    () => new TorchGenerator(0, { normalKernel: "sse" as NormalKernel }),
    /normalKernel must be "avx2" or "scalar", got "sse"/,
  );
});

Deno.test("seeds: torch keeps the low 32 bits; negatives wrap; bad seeds throw", () => {
  const ref = new TorchGenerator(5).randn(20);
  deepStrictEqual(new TorchGenerator(2n ** 32n + 5n).randn(20), ref);
  deepStrictEqual(new TorchGenerator(2 ** 32 + 5).randn(20), ref);
  deepStrictEqual(new TorchGenerator(-1).randn(20), new TorchGenerator(0xffffffff).randn(20));
  deepStrictEqual(new TorchGenerator(2n ** 64n - 1n).randn(5), new TorchGenerator(-1).randn(5));
  throws(() => new TorchGenerator(0.5), /integer, got 0\.5/);
  throws(() => new TorchGenerator(2n ** 64n), /\[-2\^63, 2\^64 - 1\]/);
  throws(() => new TorchGenerator(0).randn(-1), /non-negative integer, got -1/);
  strictEqual(new TorchGenerator(0).randn(0).length, 0);
});

Deno.test("randomSeedU32: integers in 0..2^32-1 from the CSPRNG", () => {
  const seeds = Array.from({ length: 64 }, () => randomSeedU32());
  for (const s of seeds) ok(Number.isInteger(s) && s >= 0 && s <= 0xffffffff, `bad seed ${s}`);
  ok(new Set(seeds).size > 60, "64 CSPRNG draws should almost never collide");
});

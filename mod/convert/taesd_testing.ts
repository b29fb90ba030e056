/**
 * Test helpers for the TAESD converter, written apart from it so that the
 * tests hold it against an independent reading of madebyollin/taesd
 * `taesd.py` (TAESD 1.2, commit 63436d3): a random-weight
 * `taesd_decoder.safetensors` with the real key names and shapes, and a
 * naive float64 decoder that computes the same maths directly on arrays
 * (no graph, no ONNX Runtime).
 *
 * @module
 */

import { encodeSafetensors, type SafetensorsEntry } from "../../tests/fixtures/builder/lora.ts";
import { Rng } from "../graph/mod.ts";

/** A module of the decoder's `nn.Sequential`; conv entries give in/out channels and bias. */
export type ReferenceModule =
  | { kind: "clamp" | "relu" | "upsample" | "block" }
  | { kind: "conv"; cin: number; cout: number; bias: boolean };

/** A module with its index in the Sequential (its state-dict key prefix). */
export type ReferenceLayer = ReferenceModule & { index: number };

const clamp: ReferenceModule = { kind: "clamp" };
const relu: ReferenceModule = { kind: "relu" };
const block: ReferenceModule = { kind: "block" };
const upsample: ReferenceModule = { kind: "upsample" };
const conv = (cin: number, cout: number, bias = true): ReferenceModule => ({
  kind: "conv",
  cin,
  cout,
  bias,
});

/**
 * The layers of `taesd.py`'s `Decoder()` (L34-41), written as it is there;
 * each module's index in the Sequential is its state-dict key prefix.
 */
export const REFERENCE_DECODER: readonly ReferenceLayer[] = [
  [clamp, conv(4, 64), relu],
  [block, block, block, upsample, conv(64, 64, false)],
  [block, block, block, upsample, conv(64, 64, false)],
  [block, block, block, upsample, conv(64, 64, false)],
  [block, conv(64, 3)],
].flat().map((m, index) => ({ ...m, index }));

/** The state-dict tensors of {@link REFERENCE_DECODER}: name and shape, in module order. */
export function referenceTensorShapes(): Array<{ name: string; shape: number[] }> {
  const out: Array<{ name: string; shape: number[] }> = [];
  const add = (prefix: string, cin: number, cout: number, bias: boolean) => {
    out.push({ name: `${prefix}.weight`, shape: [cout, cin, 3, 3] });
    if (bias) out.push({ name: `${prefix}.bias`, shape: [cout] });
  };
  for (const layer of REFERENCE_DECODER) {
    if (layer.kind === "conv") add(String(layer.index), layer.cin, layer.cout, layer.bias);
    // Block(64, 64).conv = Sequential(conv, ReLU, conv, ReLU, conv): convs at 0, 2, 4.
    if (layer.kind === "block") {
      for (const j of [0, 2, 4]) add(`${layer.index}.conv.${j}`, 64, 64, true);
    }
  }
  return out;
}

/** Random TAESD decoder weights by tensor name. */
export type TaesdWeights = Map<string, Float32Array>;

/**
 * Random weights, uniform in ±√(3 / fan_in) (variance 1 / fan_in), which
 * keeps the activations near unit scale through the ten residual blocks, so
 * every layer shapes the output and it stays within a few units like a real
 * decoder's; biases uniform in ±0.2, so a dropped bias shows.
 */
export function randomTaesdWeights(seed: number): TaesdWeights {
  const rng = new Rng(seed, "taesd_decoder.safetensors");
  const out: TaesdWeights = new Map();
  for (const { name, shape } of referenceTensorShapes()) {
    const n = shape.reduce((a, b) => a * b, 1);
    const bound = name.endsWith(".bias") ? 0.2 : Math.sqrt(3 / (shape[1] * 9));
    out.set(name, rng.uniform(n, bound));
  }
  return out;
}

/**
 * The weights as a `.safetensors` file laid out as the safetensors library
 * writes one (tensors sorted by name, F32, no metadata), like the published
 * `taesd_decoder.safetensors`.
 */
export function taesdSafetensors(weights: TaesdWeights): Uint8Array {
  const shapes = new Map(referenceTensorShapes().map((t) => [t.name, t.shape]));
  const entries: SafetensorsEntry[] = [...weights.keys()].sort().map((name) => ({
    name,
    dtype: "F32",
    shape: shapes.get(name) ?? [weights.get(name)!.length],
    data: weights.get(name)!,
  }));
  return encodeSafetensors(entries);
}

/** A float64 feature map, channels × height × width. */
interface Planes {
  c: number;
  h: number;
  w: number;
  data: Float64Array;
}

/** nn.Conv2d(cin, cout, 3, padding=1): cross-correlation with zero padding, in float64. */
function conv3x3(x: Planes, weight: Float32Array, bias: Float32Array | undefined): Planes {
  const { c: cin, h, w } = x;
  const cout = weight.length / (cin * 9);
  const out = new Float64Array(cout * h * w);
  for (let o = 0; o < cout; o++) {
    const plane = out.subarray(o * h * w, (o + 1) * h * w);
    if (bias) plane.fill(bias[o]);
    for (let i = 0; i < cin; i++) {
      const src = x.data.subarray(i * h * w, (i + 1) * h * w);
      for (let ky = 0; ky < 3; ky++) {
        const dy = ky - 1;
        for (let kx = 0; kx < 3; kx++) {
          const dx = kx - 1;
          const k = weight[((o * cin + i) * 3 + ky) * 3 + kx];
          const x0 = Math.max(0, -dx);
          const x1 = Math.min(w, w - dx);
          for (let y = Math.max(0, -dy); y < Math.min(h, h - dy); y++) {
            const from = (y + dy) * w + dx;
            const to = y * w;
            for (let xx = x0; xx < x1; xx++) plane[to + xx] += k * src[from + xx];
          }
        }
      }
    }
  }
  return { c: cout, h, w, data: out };
}

function reluPlanes(x: Planes): Planes {
  return { ...x, data: x.data.map((v) => v > 0 ? v : 0) };
}

/** nn.Upsample(scale_factor=2), mode nearest: out[y][x] = in[⌊y/2⌋][⌊x/2⌋]. */
function upsample2(x: Planes): Planes {
  const h = x.h * 2;
  const w = x.w * 2;
  const out = new Float64Array(x.c * h * w);
  for (let c = 0; c < x.c; c++) {
    for (let y = 0; y < h; y++) {
      for (let xx = 0; xx < w; xx++) {
        out[(c * h + y) * w + xx] = x.data[(c * x.h + (y >> 1)) * x.w + (xx >> 1)];
      }
    }
  }
  return { c: x.c, h, w, data: out };
}

/**
 * TAESD's decoder on one latent `[4, h, w]` in float64, followed by diffusers'
 * `DecoderTiny` output mapping `x·2 − 1`; returns `[3, 8h, 8w]`.
 */
export function referenceDecode(
  weights: TaesdWeights,
  latent: Float32Array,
  h: number,
  w: number,
): Float64Array {
  let x: Planes = { c: 4, h, w, data: Float64Array.from(latent) };
  const convAt = (p: Planes, prefix: string) =>
    conv3x3(p, weights.get(`${prefix}.weight`)!, weights.get(`${prefix}.bias`));
  for (const layer of REFERENCE_DECODER) {
    const at = String(layer.index);
    switch (layer.kind) {
      case "clamp":
        x = { ...x, data: x.data.map((v) => Math.tanh(v / 3) * 3) };
        break;
      case "conv":
        x = convAt(x, at);
        break;
      case "relu":
        x = reluPlanes(x);
        break;
      case "upsample":
        x = upsample2(x);
        break;
      case "block": {
        const h1 = reluPlanes(convAt(x, `${at}.conv.0`));
        const h2 = reluPlanes(convAt(h1, `${at}.conv.2`));
        const h3 = convAt(h2, `${at}.conv.4`);
        x = reluPlanes({ ...h3, data: h3.data.map((v, i) => v + x.data[i]) });
        break;
      }
    }
  }
  return x.data.map((v) => v * 2 - 1);
}

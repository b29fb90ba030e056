/**
 * Converts TAESD's published decoder weights (`taesd_decoder.safetensors`,
 * madebyollin/taesd) into the ONNX tiny VAE decoder the engine runs
 * (`[models] tiny_vae_decoder`), with the project's own graph builder. Same
 * bytes in, same bytes out: nothing in the output depends on the time, the
 * machine or the file name.
 *
 * The network is TAESD's `Decoder` as `taesd.py` defines it at the TAESD 1.2
 * release (madebyollin/taesd commit 63436d3, blob 0355a81 of `taesd.py`,
 * unchanged since 5223a3f):
 *
 * - `conv(n_in, n_out)` (L9-10) is `nn.Conv2d(n_in, n_out, 3, padding=1)`:
 *   3×3, stride 1, zero padding 1, with a bias unless `bias=False`;
 * - `Clamp` (L12-14) is `tanh(x / 3) * 3`;
 * - `Block(n_in, n_out)` (L16-23) is `fuse(conv(x) + skip(x))` with
 *   `conv = Sequential(conv, ReLU, conv, ReLU, conv)`, `skip = Identity` (every
 *   decoder block is 64 → 64; the 1×1 skip conv exists only when channels differ)
 *   and `fuse = ReLU`;
 * - `Decoder()` (L34-41) is the `nn.Sequential`
 *   `Clamp, conv(4,64), ReLU, [Block(64,64) ×3, Upsample(×2), conv(64,64,bias=False)] ×3,
 *   Block(64,64), conv(64,3)`, whose `nn.Upsample(scale_factor=2)` is nearest-neighbour.
 *
 * The safetensors keys are that `Sequential`'s state-dict names (index in the
 * Sequential, then the submodule path), all F32:
 *
 * | key | shape |
 * | --- | --- |
 * | `1.weight`, `1.bias` | [64, 4, 3, 3], [64] |
 * | `B.conv.{0,2,4}.weight`, `B.conv.{0,2,4}.bias`, B ∈ {3,4,5,8,9,10,13,14,15,18} | [64, 64, 3, 3], [64] |
 * | `7.weight`, `12.weight`, `17.weight` (after each upsample, no bias) | [64, 64, 3, 3] |
 * | `19.weight`, `19.bias` | [3, 64, 3, 3], [3] |
 *
 * 67 tensors, 1,222,531 parameters (TAESD's README table). Written the way the
 * safetensors library writes them (sorted by name, no metadata, header padded
 * to 8 bytes) they make exactly the 4,895,612 bytes of the published file.
 *
 * Around that network the model has the I/O of diffusers' `AutoencoderTiny`
 * as Optimum exports it (`VaeDecoderOnnxConfig`), the `vae_decoder` contract
 * the engine checks:
 *
 * - input `latent_sample`, float32 `[batch_size, 4, latent_height, latent_width]`:
 *   the UNet's latents as they are (TAESD's scale factor is 1; no `/ 0.18215`);
 * - output `sample`, float32 `[batch_size, 3, height, width]` (8× the latent size)
 *   in [-1, 1]: TAESD's [0, 1] image mapped by `x.mul(2).sub(1)` as diffusers'
 *   `DecoderTiny.forward` does (`src/diffusers/models/autoencoders/vae.py`,
 *   e.g. at commit 04957c2).
 *
 * Each torch op becomes the ONNX op torch exports for it (`x / 3` a Div,
 * `* 3` a Mul, `.sub(1)` a Sub), so the float32 maths is the same operation
 * for operation; the upsample is a Resize with scales [1, 1, 2, 2], mode
 * nearest, `asymmetric` coordinates and `floor` rounding, which picks source
 * pixel ⌊i/2⌋ exactly like torch's nearest mode. Initializers keep the
 * safetensors key names, nodes are named after the module path
 * (`/3/conv/0/Conv`), so the graph can be held against `taesd.py` line by line.
 *
 * @module
 */

import { Graph } from "../graph/mod.ts";
import { OPSET } from "../graph/mod.ts";
// safetensors.ts directly, not ../lora/mod.ts: that loads onnxruntime-node, and
// `deno task models` (no FFI permission) converts the download through this module.
import { parseSafetensors, type StoredTensor } from "../lora/safetensors.ts";

/**
 * Version of the converter's output. It changes whenever the bytes
 * {@link taesdDecoderToOnnx} writes for a given input would change (graph,
 * names, opset, onnx-proto's serialisation), so a digest recorded for one version is never
 * taken for another's.
 */
export const TAESD_CONVERTER_VERSION = 1;

/** Channels inside TAESD's decoder. */
const WIDTH = 64;
/** SD 1.5 latent channels. */
const LATENT_CHANNELS = 4;
/** Sequential indices of the `Block`s, per stage (`taesd.py` `Decoder`, L36-40). */
const STAGES: readonly (readonly number[])[] = [[3, 4, 5], [8, 9, 10], [13, 14, 15], [18]];
/** Sequential indices of the bias-free conv after each upsample (the upsample is one before). */
const UP_CONVS: readonly number[] = [7, 12, 17];

/** A TAESD decoder file that cannot be converted; the message says what is wrong. */
export class TaesdConversionError extends Error {
  /** Creates an error with a complete message. */
  constructor(message: string) {
    super(message);
    this.name = "TaesdConversionError";
  }
}

/** The tensors `taesd.py`'s `Decoder()` state dict holds: name → shape, in module order. */
function expectedTensors(): Map<string, readonly number[]> {
  const out = new Map<string, readonly number[]>();
  const conv = (key: string, cin: number, cout: number, bias: boolean) => {
    out.set(`${key}.weight`, [cout, cin, 3, 3]);
    if (bias) out.set(`${key}.bias`, [cout]);
  };
  conv("1", LATENT_CHANNELS, WIDTH, true);
  STAGES.forEach((blocks, stage) => {
    for (const b of blocks) for (const j of [0, 2, 4]) conv(`${b}.conv.${j}`, WIDTH, WIDTH, true);
    if (stage < UP_CONVS.length) conv(String(UP_CONVS[stage]), WIDTH, WIDTH, false);
  });
  conv("19", WIDTH, 3, true);
  return out;
}

/** Lists at most five items joined by `separator`, then how many more. */
function some(items: readonly string[], separator = ", "): string {
  const shown = items.slice(0, 5).join(separator);
  return items.length > 5 ? `${shown} and ${items.length - 5} more` : shown;
}

/** What a wrong file probably is, from its keys (the usual mix-ups). */
function guess(keys: ReadonlySet<string>): string {
  if ([...keys].some((k) => k.startsWith("decoder.layers.") || k.startsWith("encoder.layers."))) {
    return " (this looks like diffusers' AutoencoderTiny `diffusion_pytorch_model.safetensors`; " +
      "the converter reads `taesd_decoder.safetensors`)";
  }
  if (keys.has("0.weight") && !keys.has("19.weight")) {
    return " (this looks like TAESD's encoder, `taesd_encoder.safetensors`)";
  }
  return "";
}

/**
 * Checks that `tensors` are exactly TAESD's decoder: every expected key, no
 * other, each F32 with its shape and finite values.
 */
function checkTensors(
  tensors: ReadonlyMap<string, StoredTensor>,
  source: string,
): Map<string, StoredTensor> {
  const expected = expectedTensors();
  const problems: string[] = [];
  const missing = [...expected.keys()].filter((k) => !tensors.has(k));
  const extra = [...tensors.keys()].filter((k) => !expected.has(k));
  if (missing.length > 0) problems.push(`missing tensors ${some(missing)}`);
  if (extra.length > 0) problems.push(`unexpected tensors ${some(extra)}`);
  for (const [name, shape] of expected) {
    const t = tensors.get(name);
    if (t === undefined) continue;
    if (t.dtype !== "F32") problems.push(`tensor "${name}" is ${t.dtype}, expected F32`);
    if (t.shape.join(",") !== shape.join(",")) {
      problems.push(`tensor "${name}" has shape [${t.shape}], expected [${shape}]`);
      continue;
    }
    const bad = t.data.findIndex((v) => !Number.isFinite(v));
    if (bad >= 0) problems.push(`tensor "${name}" holds ${t.data[bad]} at index ${bad}`);
  }
  if (problems.length > 0) {
    throw new TaesdConversionError(
      `${source}: not TAESD's decoder (madebyollin/taesd \`taesd.py\` Decoder: ` +
        `${expected.size} F32 tensors, ${WIDTH} channels): ${some(problems, "; ")}` +
        guess(new Set(tensors.keys())),
    );
  }
  return new Map(tensors);
}

/**
 * Builds the ONNX decoder graph from checked tensors (see the module comment
 * for the structure and its source lines).
 */
function decoderGraph(w: ReadonlyMap<string, StoredTensor>): Graph {
  const g = new Graph("taesd_decoder");
  const weight = (key: string) => {
    const t = w.get(key)!;
    return g.init(key, "float32", t.shape, t.data);
  };
  /** `conv(...)` of `taesd.py`: 3×3, stride 1, padding 1; the bias when the file has one. */
  const conv = (x: string, key: string, scope: string) => {
    const inputs = [x, weight(`${key}.weight`)];
    if (w.has(`${key}.bias`)) inputs.push(weight(`${key}.bias`));
    return g.op(
      "Conv",
      inputs,
      {
        kernel_shape: { ints: [3, 3] },
        pads: { ints: [1, 1, 1, 1] },
        strides: { ints: [1, 1] },
      },
      `${scope.replaceAll("/", "_")}_conv`,
      `/${scope}/Conv`,
    );
  };
  const relu = (x: string, scope: string) =>
    g.op("Relu", [x], {}, `${scope.replaceAll("/", "_")}_relu`, `/${scope}/Relu`);
  const scalar = (v: number) => g.constF([v], []);

  const z = g.input("latent_sample", "float32", [
    "batch_size",
    LATENT_CHANNELS,
    "latent_height",
    "latent_width",
  ]);
  // 0: Clamp, tanh(x / 3) * 3.
  const div = g.op("Div", [z, scalar(3)], {}, "clamp_div", "/0/Div");
  const tanh = g.op("Tanh", [div], {}, "clamp_tanh", "/0/Tanh");
  let x = g.op("Mul", [tanh, scalar(3)], {}, "clamp", "/0/Mul");
  // 1: conv(4, 64); 2: ReLU.
  x = relu(conv(x, "1", "1"), "2");
  STAGES.forEach((blocks, stage) => {
    for (const b of blocks) {
      // Block: fuse(conv(x) + skip(x)), conv = conv, ReLU, conv, ReLU, conv; skip = identity.
      let h = relu(conv(x, `${b}.conv.0`, `${b}/conv/0`), `${b}/conv/1`);
      h = relu(conv(h, `${b}.conv.2`, `${b}/conv/2`), `${b}/conv/3`);
      h = conv(h, `${b}.conv.4`, `${b}/conv/4`);
      x = relu(g.op("Add", [h, x], {}, `${b}_add`, `/${b}/Add`), `${b}/fuse`);
    }
    if (stage === UP_CONVS.length) return;
    const up = UP_CONVS[stage];
    // up - 1: nn.Upsample(scale_factor=2), nearest: output pixel i reads input pixel ⌊i/2⌋.
    x = g.op(
      "Resize",
      [x, "", g.constF([1, 1, 2, 2])],
      {
        mode: { s: "nearest" },
        coordinate_transformation_mode: { s: "asymmetric" },
        nearest_mode: { s: "floor" },
      },
      `${up - 1}_upsample`,
      `/${up - 1}/Resize`,
    );
    // up: conv(64, 64, bias=False).
    x = conv(x, String(up), String(up));
  });
  // 19: conv(64, 3), TAESD's image in [0, 1]; then DecoderTiny's x.mul(2).sub(1).
  x = conv(x, "19", "19");
  const doubled = g.op("Mul", [x, scalar(2)], {}, "out_mul", "/out/Mul");
  const sample = g.op("Sub", [doubled, scalar(1)], {}, "out_sub", "/out/Sub");
  g.output(sample, "sample", "float32", ["batch_size", 3, "height", "width"]);
  return g;
}

/**
 * Converts TAESD's decoder weights to the ONNX tiny VAE decoder the engine
 * runs (`[models] tiny_vae_decoder`): `latent_sample` float32
 * `[batch_size, 4, latent_height, latent_width]` (unscaled latents) →
 * `sample` float32 `[batch_size, 3, height, width]` in [-1, 1], opset 17,
 * every weight inline (about 4.9 MB). Deterministic: the same input bytes
 * always give the same output bytes ({@link TAESD_CONVERTER_VERSION} names
 * the output's version).
 *
 * @param safetensors the bytes of `taesd_decoder.safetensors` (madebyollin/taesd)
 * @param source the file's name for error messages
 * @returns the `.onnx` file's bytes
 * @throws SafetensorsError when the bytes are not a readable safetensors file
 * @throws TaesdConversionError when the tensors are not TAESD's decoder (a key
 *   missing or extra, a shape or dtype other than F32, a non-finite value)
 */
export function taesdDecoderToOnnx(
  safetensors: Uint8Array,
  source = "taesd_decoder.safetensors",
): Uint8Array {
  const tensors = checkTensors(parseSafetensors(safetensors, source), source);
  return decoderGraph(tensors).encode({
    opset: OPSET,
    docString:
      `TAESD decoder (madebyollin/taesd taesd_decoder.safetensors), converter version ${TAESD_CONVERTER_VERSION}`,
  }).model;
}
